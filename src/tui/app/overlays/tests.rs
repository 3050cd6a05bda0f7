//! Who gets a key, decided by `route`: the open overlay's own table (and its text),
//! then the prompt, then the pane's and the global tables.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Overlay, Route, route};
use crate::tui::action::Action;
use crate::tui::app::state::UiState;
use crate::tui::keymap::Keymap;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn a_confirmation_hears_only_its_own_keys() {
    let keymap = Keymap::defaults();
    let ui = UiState {
        overlay: Some(Overlay::Confirm(super::Confirm::Recover)),
        ..UiState::default()
    };
    assert_eq!(
        route(&ui, &keymap, &key(KeyCode::Char('y'))),
        Route::Action(Action::Yes)
    );
    // `q` quits everywhere else; here it is no answer.
    assert_eq!(
        route(&ui, &keymap, &key(KeyCode::Char('q'))),
        Route::Nowhere
    );
}

#[test]
fn an_editor_takes_its_keys_as_actions_and_the_rest_as_text() {
    let keymap = Keymap::defaults();
    let mut ui = UiState {
        overlay: Some(Overlay::Editor("lint".into())),
        ..UiState::default()
    };
    let save = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert_eq!(route(&ui, &keymap, &save), Route::Action(Action::SaveEdit));
    assert_eq!(route(&ui, &keymap, &key(KeyCode::Char('q'))), Route::Text);
    // Typed text goes into the editor's own area.
    ui.editor = Some(super::text_area(""));
    super::type_text(&mut ui, key(KeyCode::Char('q')));
    assert_eq!(
        ui.editor.as_ref().map(|e| e.lines().join("")),
        Some("q".into())
    );
}

#[test]
fn a_reader_scrolls_with_the_panes_keys_and_a_prompt_takes_what_is_typed() {
    let keymap = Keymap::defaults();
    let mut ui = UiState {
        overlay: Some(Overlay::Help),
        ..UiState::default()
    };
    assert_eq!(
        route(&ui, &keymap, &key(KeyCode::Char('j'))),
        Route::Action(Action::Down)
    );
    ui.overlay = None;
    ui.search_input = Some(String::new());
    assert_eq!(route(&ui, &keymap, &key(KeyCode::Char('q'))), Route::Prompt);
    ui.search_input = None;
    assert_eq!(
        route(&ui, &keymap, &key(KeyCode::Char('q'))),
        Route::Action(Action::Quit)
    );
}

#[test]
fn every_overlay_has_its_component_and_keys() {
    use super::Keys;
    use crate::tui::keymap::Mode;
    let editor = Overlay::Editor(String::new()).component().keys();
    let pipelines = Overlay::Sentinels.component().keys();
    let help = Overlay::Help.component().keys();
    assert_eq!(editor, Keys::Text(Mode::Editor));
    assert_eq!(pipelines, Keys::Own(Mode::Pipelines));
    assert_eq!(help, Keys::Reading);
}
