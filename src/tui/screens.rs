//! The projects the dashboard shows: each with its own UI state and latest snapshot,
//! their happenings merged, their snapshots' changes forwarded by index, the keys that
//! switch between them (`alt-1` … `alt-9`, `next_project` / `prev_project`), and the
//! announcement of what happens in a project not on screen.

use std::sync::Arc;
use std::task::Poll;

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::{mpsc, watch};

use crate::core::event::Happening;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::{Notification, UiState};
use crate::tui::keymap::{Keymap, Mode};
use crate::tui::project_tab::ProjectTab;
use crate::tui::{ActionAccess, PipelineAccess};

/// One project as the dashboard holds it.
pub struct Shown {
    pub name: String,
    pub ui: UiState,
    pub snap: Arc<Snapshot>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    pub pipelines: Option<PipelineAccess>,
    pub actions: Option<ActionAccess>,
}

impl Shown {
    pub fn new(
        name: String,
        snapshots: &mut watch::Receiver<Arc<Snapshot>>,
        pipelines: Option<PipelineAccess>,
        actions: Option<ActionAccess>,
    ) -> Self {
        let snap = snapshots.borrow_and_update().clone();
        let mut ui = UiState::default();
        ui.sync_with(&snap);
        ui.read_only = actions
            .as_ref()
            .map(|a| &a.target.db)
            .filter(|db| db.exists() && !crate::core::schema::writable(db))
            .map(|db| crate::core::schema::read_only_note(db));
        Self {
            name,
            ui,
            snap,
            snapshots: snapshots.clone(),
            pipelines,
            actions,
        }
    }

    /// Takes the latest snapshot.
    pub fn refresh(&mut self) {
        self.snap = self.snapshots.borrow_and_update().clone();
        self.ui.sync_with(&self.snap);
    }
}

/// Sends `index` each time the project's snapshot changes (the last value is read by
/// [`Shown::refresh`], so a burst of changes is one refresh).
pub fn forward_changes(
    index: usize,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    changed: mpsc::Sender<usize>,
) {
    tokio::spawn(async move {
        while snapshots.changed().await.is_ok() {
            if changed.send(index).await.is_err() {
                return;
            }
        }
    });
}

/// The next happening of any project, with the project's index (never resolves while
/// none has one).
pub async fn next_happening(
    receivers: &mut [&mut mpsc::Receiver<Happening>],
) -> (usize, Happening) {
    std::future::poll_fn(|cx| {
        for (i, rx) in receivers.iter_mut().enumerate() {
            if let Poll::Ready(Some(h)) = rx.poll_recv(cx) {
                return Poll::Ready((i, h));
            }
        }
        Poll::Pending
    })
    .await
}

/// The projects bar's tabs (empty with one project: no bar).
pub fn tabs(shown: &[Shown]) -> Vec<ProjectTab> {
    if shown.len() < 2 {
        return Vec::new();
    }
    shown
        .iter()
        .map(|s| ProjectTab::of(&s.name, &s.snap, s.ui.unread_anomalies()))
        .collect()
}

/// What a key did in the project picker.
pub enum Picked {
    /// Moved, opened or closed the picker.
    Handled,
    /// Show this project.
    Switch(usize),
}

/// The project picker's keys (`ctrl-p` or `:` opens it with several projects): `j`/`k`
/// or the arrows move, Enter shows the project, Esc closes.
pub fn picker_key(
    ev: &Event,
    ui: &mut UiState,
    keymap: &Keymap,
    current: usize,
    count: usize,
) -> Option<Picked> {
    let Event::Key(key) = ev else { return None };
    if key.kind == KeyEventKind::Release || ui.search_input.is_some() {
        return None;
    }
    if count < 2 {
        // One project: the picker has nothing to offer, and says so.
        if ui.overlay.is_none() && keymap.only(Mode::Global, key) == Some(Action::ProjectPicker) {
            ui.note = Some(
                "one project only: watch several with `maestro --project A --project B`".into(),
            );
            return Some(Picked::Handled);
        }
        return None;
    }
    if matches!(ui.overlay, Some(crate::tui::app::Overlay::Projects(_))) {
        return Some(
            crate::tui::app::overlays::projects::answer(ui, key.code, count)
                .map_or(Picked::Handled, Picked::Switch),
        );
    }
    if ui.overlay.is_none() && keymap.only(Mode::Global, key) == Some(Action::ProjectPicker) {
        ui.overlay = Some(crate::tui::app::Overlay::Projects(current));
        return Some(Picked::Handled);
    }
    None
}

/// The project a key switches to: `alt-N`, or the keymap's next / previous project.
/// Keys typed into a prompt or an overlay stay there.
pub fn switch_key(
    ev: &Event,
    ui: &UiState,
    keymap: &Keymap,
    current: usize,
    count: usize,
) -> Option<usize> {
    let Event::Key(key) = ev else { return None };
    if count < 2
        || key.kind == KeyEventKind::Release
        || ui.overlay.is_some()
        || ui.search_input.is_some()
    {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::ALT)
        && let KeyCode::Char(c) = key.code
        && let Some(n) = c.to_digit(10).filter(|n| (1..=9).contains(n))
    {
        let n = n as usize - 1;
        return (n < count).then_some(n);
    }
    match keymap.only(Mode::Global, key)? {
        Action::NextProject => Some((current + 1) % count),
        Action::PrevProject => Some((current + count - 1) % count),
        _ => None,
    }
}

/// A notification from project `from`: with several projects it names the project,
/// and when that project is not on screen the shown one's status line says so.
pub fn announce(
    shown: &mut [Shown],
    from: usize,
    current: usize,
    mut n: Notification,
) -> Notification {
    if shown.len() < 2 {
        return n;
    }
    let name = shown[from].name.clone();
    n.title = format!("[{name}] {}", n.title);
    if from != current {
        shown[current].ui.note = Some(format!("{} (alt-{} to show {name})", n.title, from + 1));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> Event {
        Event::Key(KeyEvent::new(code, modifiers))
    }

    #[test]
    fn the_picker_opens_moves_and_shows_a_project() {
        let keymap = Keymap::defaults();
        let mut ui = UiState::default();
        let none = KeyModifiers::NONE;
        assert!(
            matches!(
                picker_key(&key(KeyCode::Char(':'), none), &mut ui, &keymap, 0, 1),
                Some(Picked::Handled)
            ),
            "one project: no picker, but a word"
        );
        assert!(ui.overlay.is_none());
        assert!(
            ui.note
                .as_deref()
                .is_some_and(|n| n.starts_with("one project only")),
            "{:?}",
            ui.note
        );
        ui.note = None;
        assert!(matches!(
            picker_key(
                &key(KeyCode::Char('p'), KeyModifiers::CONTROL),
                &mut ui,
                &keymap,
                0,
                3
            ),
            Some(Picked::Handled)
        ));
        assert_eq!(ui.overlay, Some(crate::tui::app::Overlay::Projects(0)));
        picker_key(&key(KeyCode::Char('j'), none), &mut ui, &keymap, 0, 3);
        picker_key(&key(KeyCode::Down, none), &mut ui, &keymap, 0, 3);
        picker_key(&key(KeyCode::Down, none), &mut ui, &keymap, 0, 3);
        assert_eq!(
            ui.overlay,
            Some(crate::tui::app::Overlay::Projects(2)),
            "stops at the last"
        );
        assert!(matches!(
            picker_key(&key(KeyCode::Enter, none), &mut ui, &keymap, 0, 3),
            Some(Picked::Switch(2))
        ));
        assert_eq!(ui.overlay, None);
    }
}
