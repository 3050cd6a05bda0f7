//! Safe to open any project: a pipeline definition found in a project (a clone, a
//! Musician's write) runs nothing until the operator trusts that exact content.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::common::{PipelineRig as Rig, event};

/// A definition whose one step creates `file` in the project.
fn touching(trigger: &Value, file: &str) -> Value {
    json!({
        "trigger": trigger,
        "steps": [{"type": "command", "command": "touch", "params": {"args": [file]}}],
        "loop": {"type": "once"},
        "safety": {"maxIterations": 1}
    })
}

fn untrusted_notice(v: &Value, name: &str) -> bool {
    event(v) == "error"
        && v["detail"].as_str().is_some_and(|d| {
            d.contains(&format!("pipeline {name} is not trusted"))
                && d.contains(&format!("maestro sentinel trust {name}"))
        })
}

#[test]
fn no_trigger_runs_an_untrusted_definition_and_each_is_named_with_the_fix() {
    let rig = Rig::new();
    rig.write("now", &touching(&json!({"type": "immediate"}), "ran-now"));
    rig.write(
        "on-start",
        &touching(&json!({"type": "event", "event": "source"}), "ran-on-start"),
    );
    rig.write(
        "every",
        &touching(
            &json!({"type": "schedule", "intervalMs": 1000}),
            "ran-every",
        ),
    );
    // Trusted, on the same schedule: once it ran, "every" had its chance too.
    rig.define(
        "tick",
        &touching(&json!({"type": "schedule", "intervalMs": 1000}), "ran-tick"),
    );
    let mut m = rig.host();
    m.wait_all(
        "the untrusted notices",
        &[
            &|v: &Value| untrusted_notice(v, "every"),
            &|v: &Value| untrusted_notice(v, "now"),
            &|v: &Value| untrusted_notice(v, "on-start"),
        ],
    );
    // A trusted pipeline that runs after the others were loaded: once it has run, the
    // untrusted ones had every chance to run too.
    rig.write(
        "witness",
        &touching(&json!({"type": "immediate"}), "ran-witness"),
    );
    let (code, out, err) = rig.sentinel(&["trust", "witness"]);
    assert_eq!(code, 0, "{out}{err}");
    let completed = |name: &'static str| {
        move |v: &Value| event(v) == "pipeline" && v["name"] == name && v["status"] == "completed"
    };
    m.wait_all(
        "the trusted ones complete",
        &[&completed("witness"), &completed("tick")],
    );
    assert!(rig.marker("ran-witness").exists());
    for f in ["ran-now", "ran-on-start", "ran-every"] {
        assert!(!rig.marker(f).exists(), "{f}: an untrusted definition ran");
    }
    // Listed as untrusted; `start` is refused with the way to trust it.
    let (code, listing, _) = rig.sentinel(&["list", "--json"]);
    assert_eq!(code, 0);
    let listing: Value = serde_json::from_str(&listing).unwrap();
    let status = |n: &str| {
        listing["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .map(|p| p["status"].clone())
    };
    assert_eq!(status("now"), Some(json!("untrusted")));
    assert_eq!(status("witness"), Some(json!("stopped")));
    let (code, _, err) = rig.sentinel(&["start", "now"]);
    assert_eq!(code, 1);
    assert!(err.contains("maestro sentinel trust now"), "{err}");
    assert!(!rig.marker("ran-now").exists());
}

#[test]
fn a_trusted_definition_changed_by_someone_else_is_untrusted_again() {
    let rig = Rig::new();
    let def = json!({
        "trigger": {"type": "immediate"},
        "steps": [{"type": "command", "command": "true"}],
        "loop": {"type": "continuous", "intervalMs": 50},
        "safety": {"maxIterations": 100_000, "timeoutMs": 600_000}
    });
    rig.write("loop", &def);
    assert_eq!(rig.sentinel(&["trust", "loop"]).0, 0);
    let mut m = rig.host();
    m.wait_json("it runs", |v| {
        event(v) == "pipeline" && v["name"] == "loop" && v["status"] == "iteration"
    });
    // A Musician rewrites it to run its own command.
    let mut evil = def.clone();
    evil["steps"] = json!([{"type": "command", "command": "touch", "params": {"args": ["pwned"]}}]);
    rig.write("loop", &evil);
    // The notice (the host's) and the stop (the run's) come from two tasks: either first.
    m.wait_all(
        "untrusted again, and stopped",
        &[&|v| untrusted_notice(v, "loop"), &|v| {
            event(v) == "pipeline" && v["name"] == "loop" && v["status"] == "stopped"
        }],
    );
    assert!(!rig.marker("pwned").exists());
    let out = rig.cmd(&["doctor", "--json"]).output().unwrap();
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "pipelines")
        .cloned()
        .unwrap();
    assert_eq!(check["level"], "warning", "{check}");
    assert!(
        check["detail"].as_str().unwrap().contains("loop"),
        "{check}"
    );
}

#[test]
fn trust_and_untrust_start_and_stop_it() {
    let rig = Rig::new();
    rig.write(
        "loop",
        &json!({
            "trigger": {"type": "immediate"},
            "steps": [{"type": "command", "command": "true"}],
            "loop": {"type": "continuous", "intervalMs": 50},
            "safety": {"maxIterations": 100_000, "timeoutMs": 600_000}
        }),
    );
    let mut m = rig.host();
    m.wait_json("untrusted", |v| untrusted_notice(v, "loop"));
    let (code, out, _) = rig.sentinel(&["trust", "--all", "--json"]);
    assert_eq!(code, 0);
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["trusted"][0]["name"], "loop");
    assert_eq!(out["trusted"][0]["sha256"].as_str().unwrap().len(), 64);
    m.wait_json("an immediate pipeline starts once trusted", |v| {
        event(v) == "pipeline" && v["name"] == "loop" && v["status"] == "iteration"
    });
    assert_eq!(rig.sentinel(&["untrust", "loop"]).0, 0);
    m.wait_json("stopped", |v| {
        event(v) == "pipeline" && v["name"] == "loop" && v["status"] == "stopped"
    });
}

#[test]
fn huge_nested_fifo_and_linked_definitions_are_refused_without_harm() {
    let rig = Rig::new();
    let dir = rig.s.root().join(".maestro/sentinels");
    // Deeply nested condition: an error for that definition, never a crash.
    let deep = format!("{}true", "!".repeat(500_000));
    rig.write(
        "deep",
        &json!({"steps": [{"type": "condition", "check": deep, "then": [], "else": []}], "safety": {"maxIterations": 1}}),
    );
    // Larger than the 1 MiB a definition may hold.
    std::fs::write(dir.join("huge.json"), vec![b' '; 2 * 1024 * 1024]).unwrap();
    // A FIFO and a link to an endless device.
    nix::unistd::mkfifo(&dir.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.json")).unwrap();
    let mut m = rig.host();
    let refused = |name: &'static str| {
        move |v: &Value| {
            event(v) == "error"
                && v["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains(&format!("{name}.json")) && d.len() < 1000)
        }
    };
    m.wait_all(
        "the refusals, each on a short line",
        &[
            &refused("deep"),
            &refused("huge"),
            &refused("fifo"),
            &refused("zero"),
        ],
    );
    // Still answering.
    let (code, _, err) = rig.sentinel(&["list"]);
    assert_eq!(code, 0, "{err}");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);
}

#[test]
fn a_definitions_folder_made_after_start_is_followed() {
    let rig = Rig::new();
    std::fs::remove_dir_all(rig.s.root().join(".maestro")).unwrap();
    let mut m = rig.host();
    m.wait_json("the host is up", |v| event(v) == "task");
    std::fs::create_dir_all(rig.s.root().join(".maestro/sentinels")).unwrap();
    rig.write("late", &touching(&json!({"type": "immediate"}), "ran-late"));
    m.wait_json("the new definition is seen (untrusted)", |v| {
        untrusted_notice(v, "late")
    });
}

/// `trust --all` with one broken definition beside a valid one trusts the valid one,
/// names the broken one and why, and exits 1 only to say something was left out.
#[test]
fn trust_all_trusts_every_valid_definition_and_names_the_rest() {
    let rig = Rig::new();
    rig.write(
        "good",
        &json!({"trigger": {"type": "manual"}, "steps": [{"type": "command", "command": "true"}], "safety": {"maxIterations": 1}}),
    );
    std::fs::write(
        rig.s.root().join(".maestro/sentinels/broken.json"),
        "{\"steps\": [",
    )
    .unwrap();
    let (code, out, err) = rig.sentinel(&["trust", "--all", "--json"]);
    assert_eq!(code, 1, "{out} {err}");
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["ok"], false);
    assert_eq!(out["trusted"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["trusted"][0]["name"], "good");
    assert_eq!(out["refused"][0]["name"], "broken");
    assert!(
        out["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{out}"
    );
    assert!(
        err.contains("1 of 2 definitions not trusted (broken)"),
        "{err}"
    );
    // The trust was recorded: the valid one starts.
    let (code, text, _) = rig.sentinel(&["trust", "--all"]);
    assert_eq!(code, 1);
    assert!(
        text.contains("trusted good") && text.contains("not trusted broken"),
        "{text}"
    );
}

/// A trust record in another user's data folder (HOME=/tmp, say) trusts nothing: the
/// same record in the user's own folder does (the control).
#[test]
fn a_trust_record_in_another_users_data_folder_trusts_nothing() {
    let rig = Rig::new();
    rig.define("tick", &touching(&json!({"type": "immediate"}), "ran-tick"));
    let status = |rig: &Rig| {
        let (_, out, _) = rig.sentinel(&["list", "--json"]);
        serde_json::from_str::<Value>(&out)
            .ok()
            .and_then(|v| v["pipelines"][0]["status"].as_str().map(str::to_owned))
            .unwrap_or(out)
    };
    assert_eq!(status(&rig), "stopped", "trusted in the user's own folder");
    if !crate::common::give_away(&rig.data.path().join("maestro")) {
        return;
    }
    assert_ne!(status(&rig), "stopped");
    let (code, _, err) = rig.sentinel(&["run", "tick"]);
    assert_ne!(code, 0, "{err}");
    assert!(!rig.s.root().join("ran-tick").exists());
}
