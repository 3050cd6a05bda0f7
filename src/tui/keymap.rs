//! Keys → [`Action`], per mode. One table drives both the handling and the help overlay,
//! so they cannot drift apart. User bindings (`[keys.global]`, `[keys.log]`, … in the
//! config) are merged over the defaults.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::tui::action::Action;
use crate::tui::pane_kinds::Pane;

/// Where a binding applies. `Global` is consulted after the focused pane's table; an
/// overlay's mode (`Confirm`, `Pipelines`, `Editor`) is consulted alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Global,
    /// A pane's own table (`[keys.tasks]`, named in the list of panes).
    Pane(Pane),
    Confirm,
    Pipelines,
    Editor,
    /// A replay's controls, consulted first (outside overlays) while replaying.
    Replay,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Pane(pane) => pane.name(),
            Self::Confirm => "confirm",
            Self::Pipelines => "pipelines",
            Self::Editor => "editor",
            Self::Replay => "replay",
        }
    }

    /// Every table, as the config names them.
    fn all() -> impl Iterator<Item = Self> {
        let panes = Pane::ALL.into_iter().map(Self::Pane);
        std::iter::once(Self::Global).chain(panes).chain([
            Self::Confirm,
            Self::Pipelines,
            Self::Editor,
            Self::Replay,
        ])
    }

    fn parse(name: &str) -> Option<Self> {
        Self::all().find(|m| m.name() == name)
    }
}

impl Pane {
    /// The key table consulted first while this pane has focus.
    pub fn mode(self) -> Mode {
        Mode::Pane(self)
    }
}

/// A key with its modifiers, as written in the config (`ctrl-k`, `shift-tab`, `?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    code: KeyCodeOrd,
    ctrl: bool,
    alt: bool,
}

/// `KeyCode` without the variants a keymap never names, ordered for stable help output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyCodeOrd {
    Char(char),
    F(u8),
    Named(&'static str),
}

const NAMED: &[(&str, KeyCode)] = &[
    ("enter", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("backspace", KeyCode::Backspace),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("pageup", KeyCode::PageUp),
    ("pagedown", KeyCode::PageDown),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("space", KeyCode::Char(' ')),
];

impl Key {
    pub fn parse(text: &str) -> Option<Self> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = text;
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        if rest == "shift-tab" {
            rest = "backtab";
        }
        let code = if let Some((name, code)) = NAMED.iter().find(|(n, _)| *n == rest) {
            match code {
                KeyCode::Char(c) => KeyCodeOrd::Char(*c),
                _ => KeyCodeOrd::Named(name),
            }
        } else if let Some(n) = rest.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
            KeyCodeOrd::F(n)
        } else {
            let mut chars = rest.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => KeyCodeOrd::Char(c),
                _ => return None,
            }
        };
        Some(Self { code, ctrl, alt })
    }

    pub fn from_event(ev: &KeyEvent) -> Option<Self> {
        let code = match ev.code {
            KeyCode::Char(c) => KeyCodeOrd::Char(c),
            KeyCode::F(n) => KeyCodeOrd::F(n),
            other => KeyCodeOrd::Named(NAMED.iter().find(|(_, c)| *c == other)?.0),
        };
        Some(Self {
            code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
            alt: ev.modifiers.contains(KeyModifiers::ALT),
        })
    }

    pub fn label(&self) -> String {
        let mut s = String::new();
        if self.ctrl {
            s.push_str("ctrl-");
        }
        if self.alt {
            s.push_str("alt-");
        }
        match self.code {
            KeyCodeOrd::Char(' ') => s.push_str("space"),
            KeyCodeOrd::Char(c) => s.push(c),
            KeyCodeOrd::F(n) => s.push_str(&format!("f{n}")),
            KeyCodeOrd::Named("backtab") => s.push_str("shift-tab"),
            KeyCodeOrd::Named(n) => s.push_str(n),
        }
        s
    }
}

const DEFAULTS: &[(Mode, &str, Action)] = &[
    (Mode::Global, "q", Action::Quit),
    (Mode::Global, "ctrl-c", Action::Quit),
    (Mode::Global, "?", Action::Help),
    (Mode::Global, "esc", Action::Close),
    (Mode::Global, "tab", Action::FocusNext),
    (Mode::Global, "shift-tab", Action::FocusPrev),
    (Mode::Global, "l", Action::FocusNext),
    (Mode::Global, "right", Action::FocusNext),
    (Mode::Global, "h", Action::FocusPrev),
    (Mode::Global, "left", Action::FocusPrev),
    (Mode::Global, "1", Action::FocusTasks),
    (Mode::Global, "2", Action::FocusLog),
    (Mode::Global, "3", Action::FocusAnomalies),
    (Mode::Global, "4", Action::FocusMessages),
    (Mode::Global, "5", Action::FocusHeartbeats),
    (Mode::Global, "6", Action::FocusWatchdog),
    (Mode::Global, "k", Action::Up),
    (Mode::Global, "up", Action::Up),
    (Mode::Global, "j", Action::Down),
    (Mode::Global, "down", Action::Down),
    (Mode::Global, "pageup", Action::PageUp),
    (Mode::Global, "ctrl-u", Action::PageUp),
    (Mode::Global, "pagedown", Action::PageDown),
    (Mode::Global, "ctrl-d", Action::PageDown),
    (Mode::Global, "g", Action::Top),
    (Mode::Global, "home", Action::Top),
    (Mode::Global, "G", Action::Bottom),
    (Mode::Global, "end", Action::Bottom),
    (Mode::Global, "enter", Action::Open),
    (Mode::Global, "ctrl-z", Action::Suspend),
    (Mode::Global, "/", Action::Search),
    (Mode::Global, "H", Action::ToggleHold),
    (Mode::Global, "R", Action::RecoverNow),
    (Mode::Global, "S", Action::Sentinels),
    (Mode::Global, "z", Action::Zoom),
    (Mode::Global, "w", Action::GoToWindow),
    (Mode::Global, "P", Action::NextProject),
    (Mode::Global, "O", Action::PrevProject),
    (Mode::Global, "ctrl-p", Action::ProjectPicker),
    (Mode::Global, ":", Action::ProjectPicker),
    (Mode::Pane(Pane::Tasks), "a", Action::Approve),
    (Mode::Pane(Pane::Tasks), "x", Action::Reject),
    (Mode::Pane(Pane::Tasks), "f", Action::ProposeFix),
    (Mode::Pane(Pane::Tasks), "i", Action::Instruct),
    (Mode::Pane(Pane::Tasks), "L", Action::Relaunch),
    (Mode::Pane(Pane::Tasks), "K", Action::KillWindow),
    (Mode::Pane(Pane::Tasks), "p", Action::Freeze),
    (Mode::Pane(Pane::Tasks), "u", Action::Thaw),
    (Mode::Pane(Pane::Tasks), "c", Action::Headroom),
    (Mode::Pane(Pane::Tasks), "s", Action::Session),
    (Mode::Pane(Pane::Tasks), "o", Action::SortTasks),
    (Mode::Pane(Pane::Log), "n", Action::SearchNext),
    (Mode::Pane(Pane::Log), "N", Action::SearchPrev),
    (Mode::Pane(Pane::Log), "[", Action::PrevAnomaly),
    (Mode::Pane(Pane::Log), "]", Action::NextAnomaly),
    (Mode::Pane(Pane::Log), "f", Action::ToggleFollow),
    (Mode::Pane(Pane::Log), "v", Action::CycleLogView),
    (Mode::Pane(Pane::Log), "space", Action::Mark),
    (Mode::Pane(Pane::Log), "y", Action::Copy),
    (Mode::Pane(Pane::Anomalies), "r", Action::MarkAllRead),
    (Mode::Pane(Pane::Messages), "t", Action::FilterTask),
    (Mode::Pane(Pane::Messages), "T", Action::FilterType),
    (Mode::Confirm, "y", Action::Yes),
    (Mode::Confirm, "Y", Action::Yes),
    (Mode::Confirm, "enter", Action::Yes),
    (Mode::Confirm, "n", Action::No),
    (Mode::Confirm, "N", Action::No),
    (Mode::Confirm, "esc", Action::No),
    (Mode::Pipelines, "k", Action::Up),
    (Mode::Pipelines, "up", Action::Up),
    (Mode::Pipelines, "j", Action::Down),
    (Mode::Pipelines, "down", Action::Down),
    (Mode::Pipelines, "s", Action::PipelineStart),
    (Mode::Pipelines, "x", Action::PipelineStop),
    (Mode::Pipelines, "p", Action::PipelinePause),
    (Mode::Pipelines, "e", Action::EditSteps),
    (Mode::Pipelines, "t", Action::PipelineTrust),
    (Mode::Pipelines, "esc", Action::Close),
    (Mode::Pipelines, "q", Action::Close),
    (Mode::Editor, "ctrl-s", Action::SaveEdit),
    (Mode::Editor, "esc", Action::Close),
    (Mode::Replay, "P", Action::ReplayPause),
    (Mode::Replay, ".", Action::ReplayStep),
    (Mode::Replay, "<", Action::ReplayBack),
    (Mode::Replay, ">", Action::ReplayForward),
    (Mode::Replay, "{", Action::ReplayBackFar),
    (Mode::Replay, "}", Action::ReplayForwardFar),
    (Mode::Replay, "+", Action::ReplayFaster),
    (Mode::Replay, "-", Action::ReplaySlower),
];

/// A `[keys.*]` entry that binds nothing, with the fix.
#[derive(Debug, thiserror::Error)]
pub enum KeymapError {
    #[error("bad default key {key}")]
    BadDefault { key: &'static str },
    #[error("[keys.{table}] is not a key table; use {tables}")]
    NoTable { table: String, tables: String },
    #[error(
        "[keys.{table}] \"{key}\" is not a key; write keys like \"q\", \"ctrl-k\", \"shift-tab\", \"f5\""
    )]
    NotAKey { table: String, key: String },
    #[error(
        "[keys.{table}] \"{key}\" = \"{action}\": no such action; `?` in the dashboard lists them"
    )]
    NoAction {
        table: String,
        key: String,
        action: String,
    },
}

#[derive(Debug, Clone)]
pub struct Keymap {
    bindings: BTreeMap<(Mode, Key), Action>,
}

impl Keymap {
    /// The defaults with the user's tables merged over them. Unknown modes, keys or
    /// actions are errors naming the table and entry.
    pub fn new(user: &BTreeMap<String, BTreeMap<String, String>>) -> Result<Self, KeymapError> {
        let mut bindings = BTreeMap::new();
        for (mode, key, action) in DEFAULTS {
            let key = Key::parse(key).ok_or(KeymapError::BadDefault { key })?;
            bindings.insert((*mode, key), *action);
        }
        for (mode_name, table) in user {
            let mode = Mode::parse(mode_name).ok_or_else(|| KeymapError::NoTable {
                table: mode_name.clone(),
                tables: Mode::all().map(Mode::name).collect::<Vec<_>>().join(", "),
            })?;
            for (key_text, action_name) in table {
                let key = Key::parse(key_text).ok_or_else(|| KeymapError::NotAKey {
                    table: mode_name.clone(),
                    key: key_text.clone(),
                })?;
                let action: Action =
                    serde_json::from_value(serde_json::Value::String(action_name.clone()))
                        .map_err(|_| KeymapError::NoAction {
                            table: mode_name.clone(),
                            key: key_text.clone(),
                            action: action_name.clone(),
                        })?;
                bindings.insert((mode, key), action);
            }
        }
        Ok(Self { bindings })
    }

    pub fn defaults() -> Self {
        Self::new(&BTreeMap::new()).unwrap_or(Self {
            bindings: BTreeMap::new(),
        })
    }

    /// The action of a key in a pane's `mode`, falling back to the global table (an
    /// overlay's own table is read with [`Self::only`]: see `app::overlays::route`).
    pub fn action(&self, mode: Mode, ev: &KeyEvent) -> Option<Action> {
        let key = Key::from_event(ev)?;
        let own = self.bindings.get(&(mode, key));
        own.or_else(|| self.bindings.get(&(Mode::Global, key)))
            .copied()
    }

    /// The action of a key in `mode`'s own table only.
    pub fn only(&self, mode: Mode, ev: &KeyEvent) -> Option<Action> {
        self.bindings.get(&(mode, Key::from_event(ev)?)).copied()
    }

    /// Every key bound to `action` in `mode`, for dialog and title hints ("y/enter").
    pub fn keys_in(&self, mode: Mode, action: Action) -> String {
        let keys: Vec<String> = self
            .bindings
            .iter()
            .filter(|((m, _), a)| *m == mode && **a == action)
            .map(|((_, k), _)| k.label())
            .collect();
        if keys.is_empty() {
            "(unbound)".into()
        } else {
            keys.join("/")
        }
    }

    /// Help lines: per mode, each action with every key bound to it.
    pub fn help(&self) -> Vec<(Mode, Vec<(String, Action)>)> {
        let mut by_mode: BTreeMap<Mode, BTreeMap<Action, Vec<String>>> = BTreeMap::new();
        let mut order: BTreeMap<Mode, Vec<Action>> = BTreeMap::new();
        for ((mode, key), action) in &self.bindings {
            let keys = by_mode
                .entry(*mode)
                .or_default()
                .entry(*action)
                .or_default();
            if keys.is_empty() {
                order.entry(*mode).or_default().push(*action);
            }
            keys.push(key.label());
        }
        order
            .into_iter()
            .map(|(mode, actions)| {
                let keys = &by_mode[&mode];
                let mut rows: Vec<(String, Action)> = actions
                    .into_iter()
                    .map(|a| (keys[&a].join(" "), a))
                    .collect();
                rows.sort_by_key(|(_, a)| {
                    DEFAULTS
                        .iter()
                        .position(|(_, _, d)| d == a)
                        .unwrap_or(usize::MAX)
                });
                (mode, rows)
            })
            .collect()
    }

    /// The simplest key bound to an action (for hints): no modifier, shortest label.
    pub fn key_for(&self, action: Action) -> Option<String> {
        self.bindings
            .iter()
            .filter(|(_, a)| **a == action)
            .map(|((_, k), _)| (k.ctrl || k.alt, k.label()))
            .min_by_key(|(modified, label)| (*modified, label.len()))
            .map(|(_, label)| label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn defaults_and_fallback_to_global() {
        let k = Keymap::defaults();
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Log),
                &ev(KeyCode::Char('n'), KeyModifiers::NONE)
            ),
            Some(Action::SearchNext)
        );
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Tasks),
                &ev(KeyCode::Char('n'), KeyModifiers::NONE)
            ),
            None
        );
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Log),
                &ev(KeyCode::Char('q'), KeyModifiers::NONE)
            ),
            Some(Action::Quit)
        );
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Tasks),
                &ev(KeyCode::BackTab, KeyModifiers::SHIFT)
            ),
            Some(Action::FocusPrev)
        );
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Tasks),
                &ev(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Quit)
        );
        assert_eq!(
            k.action(
                Mode::Pane(Pane::Tasks),
                &ev(KeyCode::Char('G'), KeyModifiers::SHIFT)
            ),
            Some(Action::Bottom)
        );
    }

    #[test]
    fn user_bindings_merge_and_errors_name_the_entry() {
        let mut user = BTreeMap::new();
        user.insert(
            "global".to_owned(),
            BTreeMap::from([("ctrl-q".to_owned(), "quit".to_owned())]),
        );
        let k = Keymap::new(&user).unwrap();
        assert_eq!(
            k.action(Mode::Global, &ev(KeyCode::Char('q'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(k.key_for(Action::Quit).as_deref(), Some("q"));
        let help = k.help();
        let global = &help.iter().find(|(m, _)| *m == Mode::Global).unwrap().1;
        assert!(
            global.iter().any(|(keys, a)| *a == Action::Quit
                && keys.contains("ctrl-q")
                && keys.contains('q'))
        );

        user.insert(
            "global".to_owned(),
            BTreeMap::from([("ctrl-q".to_owned(), "explode".to_owned())]),
        );
        assert!(
            Keymap::new(&user)
                .unwrap_err()
                .to_string()
                .contains("explode")
        );
        user.insert(
            "global".to_owned(),
            BTreeMap::from([("ctrl-".to_owned(), "quit".to_owned())]),
        );
        assert!(
            Keymap::new(&user)
                .unwrap_err()
                .to_string()
                .contains("ctrl-")
        );
        user.clear();
        user.insert("nowhere".to_owned(), BTreeMap::new());
        assert!(
            Keymap::new(&user)
                .unwrap_err()
                .to_string()
                .contains("keys.nowhere")
        );
    }

    #[test]
    fn every_action_has_a_description_and_a_default_key() {
        let k = Keymap::defaults();
        for (_, _, a) in DEFAULTS {
            assert!(!a.describe().is_empty());
            assert!(k.key_for(*a).is_some());
        }
    }
}
