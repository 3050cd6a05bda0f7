//! Definitions as files that travel (`sentinel create | export | import`), checked as
//! load checks them and untrusted where they land; a cron schedule's run at its minute.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::common::{PipelineRig as Rig, event};

fn file(rig: &Rig, name: &str) -> std::path::PathBuf {
    rig.s.root().join(format!(".maestro/sentinels/{name}.json"))
}

#[test]
fn create_export_and_import_keep_a_definition_byte_for_byte_and_untrusted() {
    let first = Rig::new();
    // Inline: the parts checked, one file written, nothing trusted.
    let (code, out, err) = first.sentinel(&[
        "create",
        "tick",
        "--steps",
        r#"[{"type": "command", "command": "true"}]"#,
        "--loop",
        r#"{"type": "count", "max": 2}"#,
        "--safety",
        r#"{"maxIterations": 2}"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("runs nothing until trusted"), "{out}");
    let written: Value =
        serde_json::from_slice(&std::fs::read(file(&first, "tick")).unwrap()).unwrap();
    assert_eq!(written["loop"]["max"], 2, "{written}");
    // Again without --force: refused, the file kept.
    let before = std::fs::read(file(&first, "tick")).unwrap();
    let (code, _, err) = first.sentinel(&[
        "create",
        "tick",
        "--steps",
        "[]",
        "--safety",
        r#"{"maxIterations": 1}"#,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(file(&first, "tick")).unwrap(), before);
    // From a file, kept as it is (its own spacing).
    let outside = first.s.root().join("nightly.json");
    let text = "{\"name\":\"nightly\",  \"trigger\": {\"type\": \"schedule\", \"cronExpression\": \"0 3 * * *\"},\n \"steps\": [{\"type\": \"command\", \"command\": \"true\"}], \"safety\": {\"maxIterations\": 1}}\n";
    std::fs::write(&outside, text).unwrap();
    let (code, out, err) = first.sentinel(&["create", "--file", outside.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(file(&first, "nightly")).unwrap(),
        text
    );
    // Exported, then imported into another project: the same bytes, untrusted there.
    let exported = first.s.root().join("tick-export.json");
    let (code, out, err) =
        first.sentinel(&["export", "tick", "--output", exported.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let printed = first.cmd(&["sentinel", "export", "tick"]).output().unwrap();
    assert_eq!(printed.stdout, before, "export prints the file as it is");
    let second = Rig::new();
    let (code, out, err) = second.sentinel(&["import", exported.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read(file(&second, "tick")).unwrap(), before);
    let (_, listed, _) = second.sentinel(&["list", "--json"]);
    let listed: Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(listed["pipelines"][0]["status"], "untrusted", "{listed}");
}

#[test]
fn a_bad_cron_expression_or_inline_step_is_refused_naming_the_field() {
    let rig = Rig::new();
    let (code, _, err) = rig.sentinel(&[
        "create",
        "cron",
        "--steps",
        "[]",
        "--trigger",
        r#"{"type": "schedule", "cronExpression": "61 * * * *"}"#,
        "--safety",
        r#"{"maxIterations": 1}"#,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("trigger.cronExpression"), "{err}");
    let (code, _, err) = rig.sentinel(&[
        "create",
        "nocommand",
        "--steps",
        r#"[{"type": "command"}]"#,
        "--safety",
        r#"{"maxIterations": 1}"#,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("steps[0].command"), "{err}");
    let (code, _, err) = rig.sentinel(&["create", "notjson", "--steps", "[{"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--steps is not JSON"), "{err}");
    assert!(!file(&rig, "cron").exists() && !file(&rig, "nocommand").exists());
}

/// `* * * * *` runs at the next minute: the wall clock starts two seconds before one
/// (libfaketime), and the run's start is waited for.
#[test]
fn an_every_minute_schedule_starts_its_run_at_the_next_minute() {
    let Some(lib) = crate::clock_gaps::faketime_lib() else {
        return;
    };
    let rig = Rig::new();
    rig.define(
        "minutely",
        &json!({
            "trigger": {"type": "schedule", "cronExpression": "* * * * *"},
            "steps": [{"type": "command", "command": "date", "params": {"args": ["+%S"]}, "outputTo": "second"}],
            "safety": {"maxIterations": 1}
        }),
    );
    let mut cmd = rig.cmd(&["--no-tui", "--json"]);
    cmd.env("LD_PRELOAD", &lib)
        .env("FAKETIME", "@2026-11-27 12:00:58")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let mut m = crate::common::Running::spawn(cmd);
    let started = m.wait_json("the run", |v| {
        event(v) == "pipeline" && v["name"] == "minutely" && v["status"] == "started"
    });
    let at = started["ts"].as_str().unwrap();
    assert!(
        at.contains("T12:01:0"),
        "started at {at}, not at the minute"
    );
}
