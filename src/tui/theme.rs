//! Themes: TOML files of semantic colour names (`themes/*.toml` are built in; more can
//! live in `<config dir>/maestro/themes/`), resolved once into a [`Theme`] whose methods
//! say what a colour means (`theme.state(..)`, `theme.age(..)`), not what it is.

use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

const BUILT_IN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    border: String,
    border_focused: String,
    title: String,
    text: String,
    muted: String,
    accent: String,
    ok: String,
    warn: String,
    error: String,
    selection_fg: String,
    selection_bg: String,
    highlight_fg: String,
    highlight_bg: String,
    state_working: String,
    state_waiting: String,
    state_error: String,
    state_terminal: String,
    state_idle: String,
}

#[derive(Debug, Clone)]
pub struct Theme {
    border: Style,
    border_focused: Style,
    title: Style,
    pub text: Style,
    pub muted: Style,
    pub accent: Style,
    pub ok: Style,
    pub warn: Style,
    pub error: Style,
    pub selection: Style,
    pub highlight: Style,
    working: Style,
    waiting: Style,
    failed: Style,
    terminal: Style,
    idle: Style,
}

impl Theme {
    /// A built-in theme by name, or `<themes_dir>/<name>.toml`. `NO_COLOR` (set and not
    /// empty) gives the monochrome theme whatever the name.
    pub fn load(name: &str, themes_dir: Option<&Path>, no_color: bool) -> Result<Self, ThemeError> {
        if no_color {
            return Ok(Self::monochrome());
        }
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
            return Self::parse(name, text);
        }
        let unknown = || ThemeError::Unknown {
            name: name.to_owned(),
            built_in: Theme::built_in_names().collect::<Vec<_>>().join(", "),
        };
        let Some(path) = themes_dir.map(|d| d.join(format!("{name}.toml"))) else {
            return Err(unknown());
        };
        let text = std::fs::read_to_string(&path).map_err(|_| unknown())?;
        Self::parse(&path.display().to_string(), &text)
    }

    pub fn built_in_names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|(n, _)| *n)
    }

    fn parse(origin: &str, text: &str) -> Result<Self, ThemeError> {
        let f: ThemeFile = toml::from_str(text).map_err(|e| ThemeError::Invalid {
            origin: origin.to_owned(),
            why: e.to_string().trim_end().to_owned(),
        })?;
        let c = |key: &str, v: &str| {
            parse_color(v).ok_or_else(|| ThemeError::NotAColour {
                origin: origin.to_owned(),
                key: key.to_owned(),
                value: v.to_owned(),
            })
        };
        let fg = |key: &str, v: &str| c(key, v).map(|col| Style::new().fg(col));
        Ok(Self {
            border: fg("border", &f.border)?,
            border_focused: fg("border_focused", &f.border_focused)?.add_modifier(Modifier::BOLD),
            title: fg("title", &f.title)?.add_modifier(Modifier::BOLD),
            text: fg("text", &f.text)?,
            muted: fg("muted", &f.muted)?,
            accent: fg("accent", &f.accent)?,
            ok: fg("ok", &f.ok)?,
            warn: fg("warn", &f.warn)?,
            error: fg("error", &f.error)?.add_modifier(Modifier::BOLD),
            selection: Style::new()
                .fg(c("selection_fg", &f.selection_fg)?)
                .bg(c("selection_bg", &f.selection_bg)?),
            highlight: Style::new()
                .fg(c("highlight_fg", &f.highlight_fg)?)
                .bg(c("highlight_bg", &f.highlight_bg)?),
            working: fg("state_working", &f.state_working)?,
            waiting: fg("state_waiting", &f.state_waiting)?,
            failed: fg("state_error", &f.state_error)?.add_modifier(Modifier::BOLD),
            terminal: fg("state_terminal", &f.state_terminal)?,
            idle: fg("state_idle", &f.state_idle)?,
        })
    }

    /// No colours at all: meaning is carried by bold, dim and reverse video.
    pub fn monochrome() -> Self {
        let plain = Style::new();
        Self {
            border: plain,
            border_focused: plain.add_modifier(Modifier::BOLD),
            title: plain.add_modifier(Modifier::BOLD),
            text: plain,
            muted: plain.add_modifier(Modifier::DIM),
            accent: plain,
            ok: plain,
            warn: plain.add_modifier(Modifier::BOLD),
            error: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            selection: plain.add_modifier(Modifier::REVERSED),
            highlight: plain.add_modifier(Modifier::REVERSED | Modifier::BOLD),
            working: plain,
            waiting: plain.add_modifier(Modifier::BOLD),
            failed: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            terminal: plain.add_modifier(Modifier::DIM),
            idle: plain,
        }
    }

    pub fn border(&self, focused: bool) -> Style {
        if focused {
            self.border_focused
        } else {
            self.border
        }
    }

    pub fn title(&self, focused: bool) -> Style {
        if focused {
            self.border_focused
        } else {
            self.title
        }
    }

    /// A task state coloured by meaning: working, waiting on the Conductor, failed, done.
    pub fn state(&self, state: &str) -> Style {
        use crate::core::domain::{Meaning, TaskState};
        match TaskState::meaning(state) {
            Meaning::Works | Meaning::Busy => self.working,
            Meaning::Waits => self.waiting,
            Meaning::Failed => self.failed,
            Meaning::Ended => self.terminal,
            Meaning::Unknown => self.idle,
        }
    }

    /// A heartbeat age as a fraction of its deadline: fine, getting old, stale.
    pub fn age(&self, ratio: f64) -> Style {
        if ratio > 1.0 {
            self.error
        } else if ratio > 0.5 {
            self.warn
        } else {
            self.ok
        }
    }
}

/// A theme that cannot be had, with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error(
        "there is no theme named {name:?}; the built-in themes are {built_in}, and user themes are read from <config dir>/maestro/themes/<name>.toml"
    )]
    Unknown { name: String, built_in: String },
    #[error("theme {origin} is not valid: {why}")]
    Invalid { origin: String, why: String },
    #[error(
        "theme {origin}: `{key} = \"{value}\"` is not a colour; use a name like \"red\" or \"#rrggbb\""
    )]
    NotAColour {
        origin: String,
        key: String,
        value: String,
    },
}

/// `red`, `lightblue`, `#rrggbb`, `reset`, or an ANSI index `0`–`255`.
pub fn parse_color(v: &str) -> Option<Color> {
    if v.eq_ignore_ascii_case("reset") {
        return Some(Color::Reset);
    }
    v.parse::<Color>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_parse() {
        for name in Theme::built_in_names() {
            Theme::load(name, None, false).unwrap();
        }
    }

    #[test]
    fn user_themes_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let dark = BUILT_IN[0].1;
        std::fs::write(
            dir.path().join("mine.toml"),
            dark.replace("\"cyan\"", "\"#ff8800\""),
        )
        .unwrap();
        Theme::load("mine", Some(dir.path()), false).unwrap();
        std::fs::write(
            dir.path().join("bad.toml"),
            dark.replace("\"cyan\"", "\"not-a-colour\""),
        )
        .unwrap();
        let err = Theme::load("bad", Some(dir.path()), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not-a-colour"), "{err}");
        let err = Theme::load("nope", Some(dir.path()), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("high-contrast"), "{err}");
    }

    #[test]
    fn no_color_wins() {
        let t = Theme::load("dark", None, true).unwrap();
        assert_eq!(t.state("error").fg, None);
    }
}
