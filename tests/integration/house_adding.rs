//! Adding a thing takes the places docs/architecture.md says, and no more: these tests
//! fail when a second home for one appears (a copy of a table, a literal beside it).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use crate::house::{outside_test_modules, rust_files, src};

/// The files of `src/` outside tests, each with its path under `src/` and its lines
/// outside test modules and comments.
fn code_lines() -> Vec<(String, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            !name.starts_with("tests")
                && !name.ends_with("_tests.rs")
                && !f.components().any(|c| c.as_os_str() == "tests")
        })
        .map(|f| {
            let rel = f
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(f).unwrap();
            let lines = outside_test_modules(&text)
                .into_iter()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(str::to_owned)
                .collect();
            (rel, lines)
        })
        .collect()
}

/// Where a task state's word means something else: a message type or an event named
/// `error`, a role's phase or a folder's status `watching`, a session's activity
/// `working`. Anything not here that spells a state is a second home for it.
const OTHER_MEANINGS: &[(&str, &str)] = &[
    ("cli/conductor/mod.rs", "watching"),
    ("cli/demo/transcripts.rs", "error"),
    ("cli/doctor/mod.rs", "error"),
    ("core/event_json.rs", "error"),
    ("core/event_log/input.rs", "watching"),
    ("core/hooks/guard/mod.rs", "error"),
    ("core/hub/sessions.rs", "watching"),
    ("core/hub/sources.rs", "exited"),
    ("core/hub/sources.rs", "watching"),
    ("core/pipeline/runner/mod.rs", "error"),
    ("core/pipeline/runner/steps.rs", "error"),
    ("core/pipeline/spec.rs", "error"),
    ("core/replay/reconstruct.rs", "error"),
    ("core/sessions/activity.rs", "working"),
    ("core/sessions/figures.rs", "error"),
    ("core/sessions/figures.rs", "working"),
    ("core/watchdog/machine.rs", "error"),
    ("core/watchdog/role.rs", "error"),
    ("core/watchdog/role.rs", "exited"),
    ("core/watchdog/role.rs", "watching"),
    ("tui/app/overlays/session.rs", "error"),
    ("tui/app/task_actions.rs", "exited"),
    ("tui/panes/messages.rs", "error"),
    ("tui/panes/watchdog.rs", "watching"),
    ("tui/theme.rs", "error"),
];

/// A task state is its line in `core/domain`'s table and the schema's CHECK list (a
/// unit test holds those two equal); code names it by `state::…`, declared from the
/// same line, never by a literal of its own.
#[test]
fn a_task_state_is_named_only_by_the_domains_table() {
    let domain = std::fs::read_to_string(src().join("core/domain/mod.rs")).unwrap();
    let line = regex::Regex::new(r#"(?m)^\s*[A-Z_]+ = "([a-z_]+)": [A-Za-z]+,$"#).unwrap();
    let states: BTreeSet<String> = line
        .captures_iter(&domain)
        .map(|c| c[1].to_owned())
        .collect();
    assert!(
        states.contains("fix_proposed") && states.len() >= 13,
        "{states:?}"
    );
    let mut literals = Vec::new();
    for (file, lines) in code_lines() {
        if file == "core/domain/mod.rs" || file == "core/schema.rs" {
            continue;
        }
        for (i, text) in lines.iter().enumerate() {
            for state in &states {
                let other = OTHER_MEANINGS.contains(&(file.as_str(), state.as_str()));
                if !other && text.contains(&format!("\"{state}\"")) {
                    literals.push(format!("{file}:{} {}", i + 1, text.trim()));
                }
            }
        }
    }
    assert!(
        literals.is_empty(),
        "name these by core::domain::state::…: {literals:#?}"
    );
}

/// A pane is its file and its line in `tui/pane_kinds.rs` (docs/architecture.md,
/// "Panes"): each line names a component its file implements (and its own state, which
/// the dashboard's state holds from that line), and no other file lists
/// every pane (a match over them all, a second list) that a new pane would have to
/// join. The layout's design is the one place that names each pane on purpose (it
/// places each by its own priority); a pane it does not place yet shares the Messages'
/// area.
#[test]
fn a_pane_is_its_file_and_its_line_in_the_list() {
    let list = std::fs::read_to_string(src().join("tui/pane_kinds.rs")).unwrap();
    let line =
        regex::Regex::new(r#"(?m)^\s*(\w+) "[a-z_]+" \w+ => (\w+)::(\w+)\s+with [^,]+,$"#).unwrap();
    let panes: Vec<(String, String, String)> = line
        .captures_iter(&list)
        .map(|c| (c[1].to_owned(), c[2].to_owned(), c[3].to_owned()))
        .collect();
    assert!(panes.len() >= 6, "{panes:?}");
    for (_, module, component) in &panes {
        let file = src().join(format!("tui/panes/{module}.rs"));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            text.contains(&format!("impl PaneComponent for {component}")),
            "{} must implement PaneComponent for {component}",
            file.display()
        );
    }
    let second_lists: Vec<String> = code_lines()
        .into_iter()
        .filter(|(file, _)| file != "tui/pane_kinds.rs" && file != "tui/layout.rs")
        .filter(|(_, lines)| {
            let text = lines.join("\n");
            panes.iter().all(|(variant, _, _)| {
                regex::Regex::new(&format!(r"\bPane::{variant}\b"))
                    .unwrap()
                    .is_match(&text)
            })
        })
        .map(|(file, _)| file)
        .collect();
    assert!(
        second_lists.is_empty(),
        "these list every pane; read the list (`Pane::ALL`, `pane_list!`) instead: {second_lists:?}"
    );
}

/// An anomaly kind is one line of the Sentinel's words (`core/domain/words.rs`): its
/// name and its mark are spelled there and read from the table everywhere else (the
/// detector, the skim, the line cutter, the Log's highlighter, the reports).
#[test]
fn an_anomaly_kind_is_spelled_only_in_the_sentinels_words() {
    let words = std::fs::read_to_string(src().join("core/domain/words.rs")).unwrap();
    let line =
        regex::Regex::new(r#"(?m)^\s*\w+: "([^"]+)", \w+, Mark::\w+(?:\("([^"]+)"\))?,"#).unwrap();
    let mut spelled = BTreeSet::new();
    for c in line.captures_iter(&words) {
        spelled.insert(c[1].to_owned());
        if let Some(mark) = c.get(2) {
            spelled.insert(mark.as_str().to_owned());
        }
    }
    assert!(
        spelled.contains("self-correction") && spelled.contains("High:"),
        "{spelled:?}"
    );
    let mut literals = Vec::new();
    for (file, lines) in code_lines() {
        if file == "core/domain/words.rs" {
            continue;
        }
        for (i, text) in lines.iter().enumerate() {
            for word in &spelled {
                if text.contains(&format!("\"{word}\"")) {
                    literals.push(format!("{file}:{} {}", i + 1, text.trim()));
                }
            }
        }
    }
    assert!(
        literals.is_empty(),
        "read these from core::domain::words::WORDS: {literals:#?}"
    );
}

/// An action is its line in `tui/action.rs` (its name in the config, its scope, its
/// help and hint), its arm where its scope sends it and its key: a pane's own action is
/// named in that pane's file alone (its `actions()` and `on_action`), in the keymap's
/// defaults, and, for the Tasks pane's task actions, in `tui/app/task_actions.rs`, which
/// asks for the confirmation or the message they share. (Every global action's arm is
/// held by the unit test `every_global_action_is_answered`.)
#[test]
fn a_panes_action_is_its_line_its_arm_and_its_key() {
    let list = std::fs::read_to_string(src().join("tui/action.rs")).unwrap();
    let line = regex::Regex::new(r#"(?m)^\s*(\w+): Pane, ""#).unwrap();
    let actions: Vec<String> = line.captures_iter(&list).map(|c| c[1].to_owned()).collect();
    assert!(actions.len() >= 10, "{actions:?}");
    let files = code_lines();
    let mut strays = Vec::new();
    for action in &actions {
        let named = regex::Regex::new(&format!(r"(^|[^\w:])Action::{action}\b")).unwrap();
        let places: Vec<&str> = files
            .iter()
            .filter(|(_, lines)| lines.iter().any(|l| named.is_match(l)))
            .map(|(file, _)| file.as_str())
            .collect();
        let panes = places
            .iter()
            .filter(|f| f.starts_with("tui/panes/"))
            .count();
        let elsewhere: Vec<&&str> = places
            .iter()
            .filter(|f| {
                !f.starts_with("tui/panes/")
                    && **f != "tui/keymap.rs"
                    && **f != "tui/app/task_actions.rs"
            })
            .collect();
        if panes != 1 || !elsewhere.is_empty() {
            strays.push(format!("{action}: {places:?}"));
        }
    }
    assert!(strays.is_empty(), "{strays:#?}");
}

/// A setting's default lives in `config/default.toml` alone: `resolve` takes each key
/// the file names with `need!`, never with a literal beside it (`pick!(…).unwrap_or(15)`
/// was a second home that could disagree with the file).
#[test]
fn a_settings_default_lives_in_the_default_file() {
    let resolve = std::fs::read_to_string(src().join("settings/resolve.rs")).unwrap();
    let beside = regex::Regex::new(r"pick!\([^)]*\)\s*\.unwrap_or").unwrap();
    let found: Vec<&str> = beside.find_iter(&resolve).map(|m| m.as_str()).collect();
    assert!(found.is_empty(), "take these with need!: {found:?}");
}
