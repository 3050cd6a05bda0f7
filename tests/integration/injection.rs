//! Text is never code (issue 34): what a session, a log or the database says cannot run
//! as a command through a trusted pipeline, redraw the operator's terminal, or lead
//! maestro to a path outside the project. Each test reproduces one finding of the
//! review on the real executable.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::{PipelineRig as Rig, event};

/// Hostile text as a Musician (or a prompt injection steering one) would write it.
const HOSTILE: &str = "step 2 self-correction: $(touch pwned1) `touch pwned2` '; touch pwned3; '";

fn unsafe_definitions() -> Vec<(&'static str, Value)> {
    let def = |program: &str, args: Vec<&str>| {
        json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": program, "params": {"args": args}}],
            "safety": {"maxIterations": 1}
        })
    };
    vec![
        (
            "quoted",
            def("sh", vec!["-c", "echo \"$event.detail\" > seen-quoted"]),
        ),
        (
            "pipefail",
            def(
                "bash",
                vec!["-o", "pipefail", "-c", "echo $event.detail > seen-pipefail"],
            ),
        ),
        (
            "wrapped",
            def(
                "timeout",
                vec!["5", "sh", "-c", "echo '$event.detail' > seen-wrapped"],
            ),
        ),
    ]
}

fn trust_file(rig: &Rig) -> PathBuf {
    let dir = rig.data.path().join("maestro/trust");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap()
}

#[test]
fn a_variable_in_a_shell_script_is_refused_at_trust_naming_the_step_and_the_safe_form() {
    let rig = Rig::new();
    for (name, def) in unsafe_definitions() {
        rig.write(name, &def);
        let (code, out, err) = rig.sentinel(&["trust", name]);
        assert_ne!(code, 0, "{name} was trusted: {out}");
        assert!(
            err.contains("steps[0].params.args[") && err.contains("$event.detail"),
            "{name}: {err}"
        );
        assert!(
            err.contains("MAESTRO_EVENT_DETAIL") && err.contains("docs/cli.md"),
            "{name} does not say how to write it: {err}"
        );
    }
}

#[test]
fn a_trusted_pipeline_passes_hostile_event_text_as_data_and_never_runs_it() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "working");
    // The safe forms: the environment, and a positional argument after the script.
    rig.define(
        "by-env",
        &json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": "sh",
                       "params": {"args": ["-c", "printf '%s|%s' \"$MAESTRO_EVENT_TASK_ID\" \"$MAESTRO_EVENT_DETAIL\" > seen-env"]}}],
            "safety": {"maxIterations": 1}
        }),
    );
    rig.define(
        "by-argument",
        &json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": "timeout",
                       "params": {"args": ["5", "sh", "-c", "printf '%s' \"$1\" > seen-arg", "_", "$event.detail"]}}],
            "safety": {"maxIterations": 1}
        }),
    );
    // Definitions trusted before this rule (by an older maestro): refused at load.
    let mut trust: Value =
        serde_json::from_str(&std::fs::read_to_string(trust_file(&rig)).unwrap()).unwrap();
    for (name, def) in unsafe_definitions() {
        rig.write(name, &def);
        let hash = maestro::core::pipeline::trust::content_hash(def.to_string().as_bytes());
        trust["trusted"][name] = json!([hash]);
    }
    std::fs::write(trust_file(&rig), trust.to_string()).unwrap();
    let mut m = rig.host();
    let refused = |name: &'static str| {
        move |v: &Value| {
            event(v) == "error"
                && v["detail"].as_str().is_some_and(|d| {
                    d.contains(&format!("{name}.json")) && d.contains("steps[0].params.args[")
                })
        }
    };
    let (quoted, pipefail, wrapped) = (refused("quoted"), refused("pipefail"), refused("wrapped"));
    let runs = |v: &Value| event(v) == "task" && v["task_id"] == "task-03";
    m.wait_all(
        "each refused at load, and the host runs",
        &[&quoted, &pipefail, &wrapped, &runs],
    );
    rig.s.append("task-03-status", &format!("{HOSTILE}\n"));
    let done = |name: &'static str| {
        move |v: &Value| event(v) == "pipeline" && v["name"] == name && v["status"] == "completed"
    };
    let (by_env, by_arg) = (done("by-env"), done("by-argument"));
    m.wait_all("the safe pipelines ran", &[&by_env, &by_arg]);
    for f in [
        "pwned1",
        "pwned2",
        "pwned3",
        "seen-quoted",
        "seen-pipefail",
        "seen-wrapped",
    ] {
        assert!(!rig.marker(f).exists(), "{f}: event text ran as code");
    }
    let by_env = std::fs::read_to_string(rig.marker("seen-env")).unwrap();
    assert!(
        by_env.starts_with("task-03|") && by_env.contains("$(touch pwned1)"),
        "{by_env}"
    );
    let by_arg = std::fs::read_to_string(rig.marker("seen-arg")).unwrap();
    assert!(by_arg.contains("'; touch pwned3; '"), "{by_arg}");
}
