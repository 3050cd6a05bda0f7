//! Pipelines are bounded by construction: captured output, background output nobody
//! reads, processes at once, working folders, values in shell code.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::common::{PipelineRig as Rig, event};

fn finished(v: &Value, name: &str) -> bool {
    event(v) == "pipeline"
        && v["name"] == name
        && matches!(v["status"].as_str(), Some("completed" | "failed"))
}

fn peak_rss_mb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024
}

#[test]
fn a_step_printing_300_mb_and_a_background_step_nobody_reads_stay_bounded() {
    let rig = Rig::new();
    rig.define(
        "loud",
        &json!({
            "trigger": {"type": "immediate"},
            "steps": [
                // Never read: its output waits in a bounded queue, then on its pipe.
                {"type": "command", "command": "yes", "params": {"wait": false}, "outputTo": "spam"},
                {"type": "command", "command": "head", "params": {"args": ["-c", "300000000", "/dev/zero"]}, "outputTo": "big"},
                {"type": "emit", "event": "sizes", "data": "$big.stdout.length"}
            ],
            "safety": {"maxIterations": 1}
        }),
    );
    let mut m = rig.host();
    let done = m.wait_json("the run ends", |v| finished(v, "loud"));
    assert_eq!(done["status"], "completed", "{done}");
    let peak = peak_rss_mb(m.child.id());
    assert!(peak < 150, "peak RSS {peak} MB after 300 MB of output");
}

#[test]
fn processes_at_once_are_capped_per_run() {
    let rig = Rig::new();
    let sleeper =
        json!({"type": "command", "command": "sleep", "params": {"args": ["30"], "wait": false}});
    let steps: Vec<Value> = std::iter::repeat_n(sleeper, 9).collect();
    rig.define(
        "swarm",
        &json!({"trigger": {"type": "immediate"}, "steps": steps, "safety": {"maxIterations": 1}}),
    );
    let mut m = rig.host();
    let failed = m.wait_json("the ninth process is refused", |v| finished(v, "swarm"));
    assert_eq!(failed["status"], "failed", "{failed}");
    let step = m
        .seen
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| event(v) == "pipeline" && v["status"] == "step" && v["step"] == 8)
        .unwrap();
    assert!(
        step["outcome"].as_str().unwrap().contains("max_processes"),
        "{step}"
    );
}

#[test]
fn a_log_line_in_a_shell_script_is_data_and_cwd_cannot_leave_the_project() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "working");
    rig.define(
        "echo-detail",
        &json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": "sh",
                       "params": {"args": ["-c", "printf '%s' \"$1\" > seen", "_", "$event.detail"]}}],
            "safety": {"maxIterations": 1}
        }),
    );
    rig.write(
        "escape",
        &json!({"steps": [{"type": "command", "command": "true", "params": {"cwd": "../.."}}], "safety": {"maxIterations": 1}}),
    );
    let mut m = rig.host();
    m.wait_json("the cwd is refused at load", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("escape.json") && d.contains("params.cwd"))
    });
    // A Musician writes a self-correction whose text is shell code.
    rig.s.append(
        "task-03-status",
        "step 2 self-correction: $(touch pwned) `touch pwned2`; touch pwned3\n",
    );
    m.wait_json("the pipeline ran", |v| finished(v, "echo-detail"));
    for f in ["pwned", "pwned2", "pwned3"] {
        assert!(!rig.marker(f).exists(), "{f}: a log line ran as code");
    }
    let seen = std::fs::read_to_string(rig.marker("seen")).unwrap();
    assert!(seen.contains("$(touch pwned)"), "{seen}");
}
