//! The panes, one component each, and the drawing of the whole dashboard.
//!
//! A pane's component ([`PaneComponent`], in its file) owns the actions that are its
//! own, what the moves and Enter do while it has focus, its drawing and its line when
//! folded. The list of panes (`tui::pane_kinds`) ties each pane to its component, so
//! adding a pane is its file and one line (docs/architecture.md, "Panes").
//!
//! `draw(frame, &DrawCtx)` renders the dashboard from the snapshot and the UI state,
//! which it reads and never writes. It reads no clock, file or global: `now` comes in
//! the context, so snapshot tests render fixed fixtures through ratatui's `TestBackend`.

pub mod conductor_line;
pub mod ctx;
pub mod projects_bar;
pub mod reader;
pub mod segments;
pub mod session_cells;
pub mod states;
pub mod status_bar;
pub mod summary;
pub mod text;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Wrap};

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::{Effect, Pane, UiState};
use crate::tui::layout::{MIN_HEIGHT, MIN_WIDTH};
use crate::tui::pane_kinds::pane_list;
pub use ctx::DrawCtx;

/// One pane: its title, its own actions, what the moves and Enter do while it has
/// focus, its drawing (which takes the state by `&`), and its line when folded.
pub trait PaneComponent: Sync {
    /// Its title on its border and in the help.
    fn title(&self) -> &'static str;

    /// The actions that are its own ([`Scope::Pane`](crate::tui::action::Scope)),
    /// answered wherever the focus is: the router and the tests read them here.
    fn actions(&self) -> &'static [Action] {
        &[]
    }

    /// One of its own actions (the note was cleared before).
    fn on_action(&self, _ui: &mut UiState, _action: Action, _snap: &Snapshot) -> Vec<Effect> {
        vec![]
    }

    /// A move of `delta` rows (a key, a page, the ends) while it has focus.
    fn move_by(&self, _ui: &mut UiState, _snap: &Snapshot, _delta: i64) {}

    /// The end (`G`) while it has focus: its last row.
    fn to_end(&self, ui: &mut UiState, snap: &Snapshot) {
        self.move_by(ui, snap, i64::MAX / 2);
    }

    /// Enter while it has focus.
    fn open(&self, _ui: &mut UiState, _snap: &Snapshot) {}

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx);

    /// Folded to one line: its label, and what it holds said in a line.
    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>);
}

/// The state of a pane that has none of its own (its line in the list says `with NoState`).
pub type NoState = ();

/// A row index moved by `delta` within `len` rows.
pub(crate) fn moved(cur: usize, len: usize, delta: i64) -> usize {
    if len == 0 {
        return 0;
    }
    let next = cur as i64 + delta;
    next.clamp(0, len as i64 - 1) as usize
}

/// Declares each component's module (its file) and ties each [`Pane`] to its
/// component, from the one list in `tui::pane_kinds`.
macro_rules! registry {
    ($(
        $(#[$doc:meta])*
        $variant:ident $name:literal $focus:ident => $module:ident::$component:ident with $($state:ident)::+,
    )+) => {
        $( pub mod $module; )+

        impl Pane {
            /// The component that answers this pane's actions and draws it.
            pub fn component(self) -> &'static dyn PaneComponent {
                match self {
                    $( Self::$variant => &$module::$component, )+
                }
            }
        }
    };
}

pane_list!(registry);

impl Pane {
    /// Its title.
    pub fn title(self) -> &'static str {
        self.component().title()
    }

    /// The pane whose component lists `action` as its own.
    pub fn owning(action: Action) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.component().actions().contains(&action))
    }
}

/// Where the panes go: the whole screen, or below the projects bar when several
/// projects are shown.
pub fn panes_area(screen: Rect, projects: usize) -> Rect {
    if projects > 1 {
        Rect {
            y: screen.y + 1,
            height: screen.height.saturating_sub(1),
            ..screen
        }
    } else {
        screen
    }
}

/// Draws the dashboard. It reads the state and writes none: what only the drawing
/// can measure (how far the open reader scrolls) is returned for the loop to keep.
pub fn draw(frame: &mut Frame, ctx: &DrawCtx) -> Option<reader::Extent> {
    let area = panes_area(frame.area(), ctx.projects.len());
    if ctx.projects.len() > 1 {
        projects_bar::draw(
            frame,
            Rect {
                height: 1,
                ..frame.area()
            },
            ctx,
        );
    }
    let Some(rects) = ctx.ui.layout(area, ctx.snap) else {
        let msg = format!(
            "Terminal too small: {}x{}.\nmaestro needs at least {MIN_WIDTH}x{MIN_HEIGHT}.\nEnlarge the window, or press q to quit.",
            area.width, area.height
        );
        let [middle] = Layout::vertical([Constraint::Length(3)])
            .flex(Flex::Center)
            .areas(area);
        frame.render_widget(
            Paragraph::new(msg)
                .alignment(Alignment::Center)
                .style(ctx.theme.warn)
                .wrap(Wrap { trim: true }),
            middle,
        );
        return None;
    };
    if let Some(pane) = ctx.ui.zoomed {
        // One pane on the whole screen (the status bar stays).
        let whole = Rect {
            height: area.height.saturating_sub(1),
            ..area
        };
        pane.component().draw(frame, whole, ctx);
    } else {
        for pane in Pane::ALL {
            let rect = rects.get(pane);
            if rect.height < crate::tui::layout::SUMMARY_BELOW {
                summary::draw(frame, rect, ctx, pane);
                continue;
            }
            pane.component().draw(frame, rect, ctx);
        }
    }
    if status_bar::draw(frame, rects.status, ctx) && ctx.ui.overlay.is_none() {
        status_bar::draw_note_box(frame, area, ctx);
    }
    crate::tui::app::overlays::draw(frame, area, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::action::Scope;

    /// Each action has one place that answers it: a pane's own action is listed by
    /// exactly one pane, a pane lists only its own, a focus action focuses one pane.
    #[test]
    fn every_action_is_answered_by_one_place() {
        for action in Action::ALL {
            let owners = Pane::ALL
                .into_iter()
                .filter(|p| p.component().actions().contains(&action))
                .count();
            let focused = Pane::ALL
                .into_iter()
                .filter(|p| action.focused_pane() == Some(*p))
                .count();
            match action.scope() {
                Scope::Pane => assert_eq!((owners, focused), (1, 0), "{action:?}"),
                Scope::Focus => assert_eq!((owners, focused), (0, 1), "{action:?}"),
                _ => assert_eq!((owners, focused), (0, 0), "{action:?}"),
            }
        }
    }

    /// A pane's title is its component's, and its key table is named after it.
    #[test]
    fn each_pane_is_its_component() {
        for pane in Pane::ALL {
            assert_eq!(pane.title(), pane.component().title());
            assert_eq!(pane.name(), pane.title().to_lowercase());
        }
    }
}
