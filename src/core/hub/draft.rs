//! The snapshot the hub builds, and what changed in it since it was last published.
//! Editing it marks it changed: what is sent again derives from what was written, never
//! from a flag set by hand beside the write (one forgotten is a snapshot not sent until
//! something else changes). The task views follow the writes to the stores they read
//! (`hub::written`); the draft names them all only when a database appears, which
//! changes which tasks there are.

use std::collections::HashSet;

use crate::core::snapshot::Snapshot;

#[derive(Debug)]
pub(super) struct Draft {
    snapshot: Snapshot,
    /// Something was written since the last publication.
    changed: bool,
    /// Tasks whose view must be built again before the next publication.
    views: HashSet<String>,
}

impl Draft {
    /// A first snapshot, to be published.
    pub(super) fn new(snapshot: Snapshot) -> Self {
        Self {
            snapshot,
            changed: true,
            views: HashSet::new(),
        }
    }

    pub(super) fn read(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The snapshot, to change: it is sent again at the next publication.
    pub(super) fn edit(&mut self) -> &mut Snapshot {
        self.changed = true;
        &mut self.snapshot
    }

    /// Every one of these tasks' views must be built again.
    pub(super) fn tasks_changed(&mut self, tasks: impl IntoIterator<Item = String>) {
        self.changed = true;
        self.views.extend(tasks);
    }

    /// The snapshot to send: `derive` sets what is derived at publication (the task
    /// views, the Conductor's figures) and the version grows by one; nothing is marked.
    pub(super) fn finish(&mut self, derive: impl FnOnce(&mut Snapshot)) -> Snapshot {
        derive(&mut self.snapshot);
        self.snapshot.version += 1;
        self.snapshot.clone()
    }

    /// What changed since the last publication, taken (the tasks whose view to build
    /// again), or `None` when nothing did.
    pub(super) fn take_changes(&mut self) -> Option<HashSet<String>> {
        std::mem::take(&mut self.changed).then(|| std::mem::take(&mut self.views))
    }
}

#[cfg(test)]
mod tests {
    use super::Draft;
    use crate::core::snapshot::Snapshot;

    #[test]
    fn what_is_published_again_follows_what_was_written() {
        let mut draft = Draft::new(Snapshot::default());
        // The first snapshot is sent, then nothing until something is written.
        assert_eq!(draft.take_changes().map(|v| v.len()), Some(0));
        assert_eq!(draft.take_changes(), None);
        let _ = draft.read();
        assert_eq!(draft.take_changes(), None, "a read changes nothing");
        draft.edit().anomaly_count += 1;
        assert_eq!(draft.take_changes().map(|v| v.len()), Some(0));
        draft.tasks_changed(["task-01".to_owned(), "task-01".to_owned()]);
        draft.tasks_changed(["task-02".to_owned()]);
        let views = draft.take_changes().expect("changed");
        assert_eq!(views.len(), 2);
        let sent = draft.finish(|s| s.anomaly_count += 0);
        assert_eq!((sent.version, sent.anomaly_count), (1, 1));
        assert_eq!(draft.take_changes(), None, "finishing marks nothing");
    }
}
