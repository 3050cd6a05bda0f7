//! What a task's view reads, written only by naming the tasks written for: each store
//! the views read is held in a [`Written`], which gives `&` freely and `&mut` only to
//! a write that says which tasks' views it changes. The publication takes the marks
//! and builds those views again, so a view follows the writes to what it reads; there
//! is no call beside a write to remember.

use std::collections::HashSet;
use std::ops::Deref;

/// A store a task's view reads (see the module's words).
#[derive(Debug, Default)]
pub(super) struct Written<T> {
    store: T,
    /// Tasks whose view reads what was written since the last publication.
    marked: HashSet<String>,
    /// A write that may have changed what every view reads.
    all: bool,
}

impl<T> Written<T> {
    pub(super) fn new(store: T) -> Self {
        Self {
            store,
            marked: HashSet::new(),
            all: false,
        }
    }

    /// To change what `task`'s view reads.
    pub(super) fn write(&mut self, task: &str) -> &mut T {
        if !self.marked.contains(task) {
            self.marked.insert(task.to_owned());
        }
        &mut self.store
    }

    /// To change what any view may read (a restart of every forecast, say).
    pub(super) fn write_all(&mut self) -> &mut T {
        self.all = true;
        &mut self.store
    }

    /// A change whose tasks are known from what it returns: `written` names them (an
    /// empty list says the change touches nothing a view reads).
    pub(super) fn write_then<R>(
        &mut self,
        change: impl FnOnce(&mut T) -> R,
        written: impl FnOnce(&R) -> Vec<String>,
    ) -> R {
        let out = change(&mut self.store);
        self.marked.extend(written(&out));
        out
    }

    /// The marks since the last publication, taken: (every view, these tasks' views).
    pub(super) fn take_marks(&mut self) -> (bool, HashSet<String>) {
        (
            std::mem::take(&mut self.all),
            std::mem::take(&mut self.marked),
        )
    }
}

impl<T> Deref for Written<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::Written;

    /// Reading marks nothing; each write marks what it names; taking clears.
    #[test]
    fn writes_mark_the_tasks_they_name() {
        let mut store: Written<Vec<u8>> = Written::new(Vec::new());
        assert_eq!(store.len(), 0);
        assert_eq!(
            store.take_marks(),
            (false, std::collections::HashSet::new())
        );
        store.write("task-01").push(1);
        store.write_then(Vec::pop, |_| vec!["task-02".to_owned()]);
        let (all, marked) = store.take_marks();
        assert!(!all);
        assert_eq!(marked.len(), 2);
        store.write_all().clear();
        assert!(store.take_marks().0);
        assert_eq!(
            store.take_marks(),
            (false, std::collections::HashSet::new())
        );
    }
}
