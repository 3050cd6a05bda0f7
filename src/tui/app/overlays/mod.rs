//! The overlays over the panes, one component each. A component owns its keys (which
//! key table answers while it is open, and whether other keys are typed into it), what
//! an action does while it is open, and its drawing. [`Overlay`] names the overlay open
//! and carries what it shows ([`kinds`], plain data); the list of overlays there ties
//! each variant to its component, so adding an overlay is its own file and one line
//! (docs/architecture.md, "Overlays").
//!
//! Within a screen, who gets a key is decided in one place, [`route`]: the open
//! overlay, else the prompt being typed, else the focused pane's table, else the global
//! one. Before that, the loop (`navigate` in the tui module) takes the keys that act
//! above any one screen: the project picker, a switch of project, the replay's controls.

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::Rect;

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::state::{Effect, UiState};
use crate::tui::keymap::{Keymap, Mode};
use crate::tui::panes::ctx::DrawCtx;
pub use crate::tui::panes::reader::Extent;

pub mod kinds;

pub use kinds::{Compose, ComposeKind, Confirm, Overlay};

/// How an open overlay takes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Its own key table only: no other binding answers while it is open.
    Own(Mode),
    /// Its own key table, and every other key is typed into its text.
    Text(Mode),
    /// The focused pane's and the global keys, read as a reader's: the moves scroll,
    /// Close or Open closes, Quit quits.
    Reading,
}

/// One overlay: its keys, what an action does while it is open, its drawing.
pub trait Component: Sync {
    fn keys(&self) -> Keys {
        Keys::Reading
    }

    /// An action while it is open (the note was cleared before).
    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        read(ui, action, snap)
    }

    /// A key its table does not bind, with [`Keys::Text`]: typed into its text.
    fn on_text(&self, _ui: &mut UiState, _key: KeyEvent) {}

    /// Draws it; a reading overlay says how far it can scroll (the draw writes no
    /// state: the loop keeps that for the next keys).
    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent>;
}

/// Where a key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// An action for [`UiState::update`].
    Action(Action),
    /// Typed into the open overlay's text.
    Text,
    /// Typed into the prompt (a search, or the Tasks filter).
    Prompt,
    /// Nothing answers it.
    Nowhere,
}

/// Decides who gets a key: the open overlay (its table, its text), the prompt being
/// typed, then the focused pane's table and the global one.
pub fn route(ui: &UiState, keymap: &Keymap, key: &KeyEvent) -> Route {
    let own = ui.overlay.as_ref().map(|o| o.component().keys());
    match own {
        Some(Keys::Own(mode)) => keymap.only(mode, key).map_or(Route::Nowhere, Route::Action),
        Some(Keys::Text(mode)) => keymap.only(mode, key).map_or(Route::Text, Route::Action),
        _ if ui.search_input.is_some() => Route::Prompt,
        _ => keymap
            .action(ui.focus.mode(), key)
            .map_or(Route::Nowhere, Route::Action),
    }
}

/// Types a key into the open overlay's text.
pub fn type_text(ui: &mut UiState, key: KeyEvent) {
    if let Some(component) = ui.overlay.as_ref().map(Overlay::component) {
        component.on_text(ui, key);
    }
}

/// Draws the open overlay, if any, over `area`; a reader's extent, as drawn.
pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
    let overlay = ctx.ui.overlay.as_ref()?;
    overlay.component().draw(frame, area, ctx)
}

/// A reading overlay's keys: Quit quits, Close or Open closes, the moves of every list
/// scroll it (a row, a page, the ends).
pub(crate) fn read(ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
    match action {
        Action::Quit => return ui.quit(snap),
        Action::Close | Action::Open => close(ui),
        _ => scroll(ui, action),
    }
    vec![]
}

/// An editor's text area holding `text`: no cursor-line style, long lines folded
/// (soft wrap) so what is typed stays in view.
pub(crate) fn text_area(text: &str) -> ratatui_textarea::TextArea<'static> {
    let mut area = ratatui_textarea::TextArea::new(text.lines().map(str::to_owned).collect());
    area.set_cursor_line_style(ratatui::style::Style::default());
    area.set_wrap_mode(ratatui_textarea::WrapMode::WordOrGlyph);
    area
}

impl UiState {
    /// Keeps what the last frame measured of the open reader (how far it scrolls, its
    /// page), for the keys that scroll it; the draw itself writes nothing.
    pub fn drawn(&mut self, reader: Option<Extent>) {
        if let Some(extent) = reader {
            self.overlay_scroll_max = extent.max;
            self.overlay_page = extent.page;
        }
    }
}

/// Closes the open overlay; the next one opens at its top.
pub(crate) fn close(ui: &mut UiState) {
    ui.overlay = None;
    ui.overlay_scroll = 0;
}

fn scroll(ui: &mut UiState, action: Action) {
    let max = ui.overlay_scroll_max;
    let page = ui.overlay_page.saturating_sub(1).max(1);
    let at = ui.overlay_scroll.min(max);
    ui.overlay_scroll = match action {
        Action::Down => at.saturating_add(1),
        Action::Up => at.saturating_sub(1),
        Action::PageDown => at.saturating_add(page),
        Action::PageUp => at.saturating_sub(page),
        Action::Top => 0,
        Action::Bottom => max,
        _ => at,
    }
    .min(max);
}

/// Declares each component's module (its file) and ties each variant of [`Overlay`] to
/// its component, from the one list in [`kinds`].
macro_rules! registry {
    ($(
        $(#[$doc:meta])*
        $variant:ident $(($($payload:ty),+))? => $module:ident::$component:ident,
    )+) => {
        $( pub mod $module; )+

        impl Overlay {
            /// The component that takes this overlay's keys and draws it.
            pub fn component(&self) -> &'static dyn Component {
                match self {
                    $( Self::$variant { .. } => &$module::$component, )+
                }
            }
        }
    };
}

kinds::overlay_list!(registry);

#[cfg(test)]
mod tests;
