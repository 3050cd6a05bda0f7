//! Sentinel pipelines end to end: definition files, the running host inside a real
//! `maestro --no-tui`, and the `maestro sentinel …` commands that reach it.
#![allow(clippy::unwrap_used)]

use crate::common::{PipelineRig as Rig, event};
use serde_json::{Value, json};

fn pipeline(v: &Value, name: &str, status: &str) -> bool {
    event(v) == "pipeline" && v["name"] == name && v["status"] == status
}

#[test]
fn an_immediate_pipeline_runs_its_steps_and_loop() {
    let rig = Rig::new();
    rig.define("build", &json!({
        "name": "build",
        "trigger": {"type": "immediate"},
        "steps": [
            {"type": "command", "command": "sh", "params": {"args": ["-c", "echo built; exit 3"]}, "outputTo": "build"},
            {"type": "condition", "check": "$build.exitCode === 3 && $build.lines[0] == 'built'",
             "then": [{"type": "emit", "event": "build:failed", "data": "$build"}],
             "else": [{"type": "command", "command": "false"}]}
        ],
        "loop": {"type": "count", "max": 2},
        "safety": {"maxIterations": 5}
    }));
    let mut m = rig.host();
    m.wait_json("started", |v| pipeline(v, "build", "started"));
    let it = m.wait_json("iteration 1", |v| pipeline(v, "build", "iteration"));
    assert_eq!(it["iteration"], 1);
    assert!(it["step"].is_null());
    let step = m.wait_json("step 0", |v| pipeline(v, "build", "step"));
    assert_eq!(
        (step["step"].as_u64(), step["outcome"].as_str()),
        (Some(0), Some("exit 3")),
        "a non-zero exit is a finished step"
    );
    let step = m.wait_json("step 1", |v| pipeline(v, "build", "step"));
    assert_eq!(step["outcome"], "then");
    m.wait_json("iteration 2", |v| {
        pipeline(v, "build", "iteration") && v["iteration"] == 2
    });
    m.wait_json("completed", |v| pipeline(v, "build", "completed"));
}

#[test]
fn a_bad_definition_is_refused_with_its_path_and_the_others_run() {
    let rig = Rig::new();
    rig.write("broken", &json!({"steps": [{"type": "command", "command": "true"}, {"type": "command"}], "safety": {"maxIterations": 1}}));
    rig.define("fine", &json!({"trigger": {"type": "immediate"}, "steps": [{"type": "command", "command": "true"}], "safety": {"maxIterations": 1}}));
    let mut m = rig.host();
    let e = m.wait_json("refusal", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("broken.json")
    });
    assert!(
        e["detail"].as_str().unwrap().contains("steps[1].command"),
        "{e}"
    );
    m.wait_json("the other runs", |v| pipeline(v, "fine", "completed"));
    // A step that cannot start fails the run (onError defaults to fail).
    rig.define("missing", &json!({"trigger": {"type": "immediate"}, "steps": [{"type": "command", "command": "no-such-program-maestro"}], "safety": {"maxIterations": 1}}));
    let f = m.wait_json("failed", |v| pipeline(v, "missing", "failed"));
    assert!(f["outcome"].as_str().unwrap().contains("cannot run"), "{f}");
}

#[test]
fn sentinel_commands_start_pause_edit_and_stop_a_running_pipeline() {
    let rig = Rig::new();
    let out = rig.s.root().join("out.txt");
    let step = |word: &str| json!({"type": "command", "command": "sh", "params": {"args": ["-c", format!("echo {word} >> out.txt")]}});
    rig.define(
        "loop",
        &json!({
            "steps": [step("A")],
            "loop": {"type": "continuous", "intervalMs": 50},
            "safety": {"maxIterations": 10000, "timeoutMs": 600_000}
        }),
    );
    // Without a host: listing works from the files, starting does not.
    let (code, listing, _) = rig.sentinel(&["list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&listing).unwrap()["pipelines"][0]["status"],
        "stopped"
    );
    let (code, _, err) = rig.sentinel(&["start", "loop"]);
    assert_eq!(code, 1);
    assert!(err.contains("no maestro is running"), "{err}");

    let mut m = rig.host();
    m.wait_json("host up", |v| event(v) == "task");
    let (code, out_text, err) = rig.sentinel(&["start", "loop"]);
    assert_eq!(code, 0, "{out_text} {err}");
    m.wait_json("running", |v| pipeline(v, "loop", "iteration"));

    let (code, _, _) = rig.sentinel(&["pause", "loop"]);
    assert_eq!(code, 0);
    m.wait_json("paused", |v| pipeline(v, "loop", "paused"));
    assert_eq!(rig.sentinel(&["pause", "loop"]).0, 1, "already paused");
    assert_eq!(rig.sentinel(&["resume", "loop"]).0, 0);
    m.wait_json("resumed", |v| pipeline(v, "loop", "resumed"));

    // A bad step is refused before anything is written.
    let before = std::fs::read(rig.s.root().join(".maestro/sentinels/loop.json")).unwrap();
    let (code, _, err) = rig.sentinel(&["step", "add", "loop", "1", r#"{"type":"command"}"#]);
    assert_eq!(code, 2);
    assert!(err.contains("steps[1].command"), "{err}");
    assert_eq!(
        std::fs::read(rig.s.root().join(".maestro/sentinels/loop.json")).unwrap(),
        before
    );
    assert_eq!(
        rig.sentinel(&["step", "remove", "loop", "7"]).0,
        2,
        "out of range"
    );

    // Editing the running pipeline: the next iteration uses the new step.
    let (code, answer, err) = rig.sentinel(&[
        "step",
        "update",
        "loop",
        "0",
        &step("B").to_string(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["ok"], true);
    m.wait_json("edited", |v| pipeline(v, "loop", "edited"));
    let (_, listed, _) = rig.sentinel(&["step", "list", "loop", "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["name"], "loop");
    assert_eq!(listed["steps"][0], step("B"));
    let edited_at = m.seen.len();
    m.wait_json("two more iterations", |v| pipeline(v, "loop", "iteration"));
    m.wait_json("", |v| pipeline(v, "loop", "iteration"));
    assert!(edited_at > 0);
    assert!(std::fs::read_to_string(&out).unwrap().contains("B\n"));

    assert_eq!(rig.sentinel(&["stop", "loop"]).0, 0);
    m.wait_json("stopped", |v| pipeline(v, "loop", "stopped"));
}

#[test]
fn nested_pipelines_and_missing_variables() {
    let rig = Rig::new();
    rig.define("outer", &json!({
        "trigger": {"type": "immediate"},
        "steps": [
            {"type": "sentinel", "await": true, "outputTo": "child", "definition": {
                "name": "inner", "safety": {"maxIterations": 1},
                "steps": [{"type": "command", "command": "true", "outputTo": "tests"}]}},
            {"type": "condition", "check": "$child.tests.exitCode == 0", "then": [{"type": "emit", "event": "ok"}]},
            {"type": "command", "command": "echo", "params": {"args": ["$nothing.here"]}, "onError": "skip", "outputTo": "x"},
            {"type": "condition", "check": "$x.error.length > 0", "then": [{"type": "emit", "event": "skipped"}]}
        ],
        "safety": {"timeoutMs": 60000}
    }));
    let mut m = rig.host();
    m.wait_json("inner ran", |v| pipeline(v, "inner", "completed"));
    let s = m.wait_json("condition", |v| {
        pipeline(v, "outer", "step") && v["step"] == 1
    });
    assert_eq!(s["outcome"], "then");
    let s = m.wait_json("skip", |v| pipeline(v, "outer", "step") && v["step"] == 2);
    assert!(
        s["outcome"]
            .as_str()
            .unwrap()
            .starts_with("skipped: $nothing is not set"),
        "{s}"
    );
    let s = m.wait_json("variable set after skip", |v| {
        pipeline(v, "outer", "step") && v["step"] == 3
    });
    assert_eq!(s["outcome"], "then");
    m.wait_json("completed", |v| pipeline(v, "outer", "completed"));
}

#[test]
fn a_background_command_is_watched_and_classified() {
    let rig = Rig::new();
    rig.define("watched", &json!({
        "trigger": {"type": "immediate"},
        "steps": [
            {"type": "command", "command": "sh", "params": {"args": ["-c", "echo compiling; echo 'error[E0308]: mismatched' >&2; exit 101"], "wait": false}, "outputTo": "build"},
            {"type": "watch", "executionId": "$build.executionId", "until": "finished", "outputTo": "out",
             "rules": [{"pattern": "error\\[E\\d+\\]", "classification": "error"}]},
            {"type": "condition", "check": "$out.exitCode == 101 && $out.lines.length == 2", "then": [{"type": "emit", "event": "seen"}]}
        ],
        "safety": {"maxIterations": 1}
    }));
    let mut m = rig.host();
    let started = m.wait_json("background start", |v| {
        pipeline(v, "watched", "step") && v["step"] == 0
    });
    assert_eq!(started["outcome"], "started exec-1");
    let watched = m.wait_json("watch", |v| {
        pipeline(v, "watched", "step") && v["step"] == 1
    });
    assert_eq!(watched["outcome"], "2 lines");
    let cond = m.wait_json("condition", |v| {
        pipeline(v, "watched", "step") && v["step"] == 2
    });
    assert_eq!(cond["outcome"], "then");
}

/// Processes whose command line holds `marker` and that still run (zombies have none).
fn running_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}

#[test]
fn an_anomaly_starts_the_pipeline_that_listens_for_it_with_the_event() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "working");
    rig.s.set_task("task-04", "working");
    rig.define("on-correction", &json!({
        "trigger": {
            "type": "event",
            "event": "anomaly",
            "filter": "$event.task_id == 'task-03' && $event.kind == 'self-correction'"
        },
        "steps": [{"type": "command", "command": "sh",
                   "params": {"args": ["-c", "printf '%s %s' \"$0\" \"$1\" > checked", "$event.task_id", "$event.anomaly"]}}],
        "safety": {"maxIterations": 1}
    }));
    let mut m = rig.host();
    m.wait_json("the host runs", |v| {
        event(v) == "task" && v["task_id"] == "task-04"
    });
    // Another task's anomaly passes the filter by.
    rig.s
        .append("task-04-status", "step 1 self-correction: not this one\n");
    m.wait_json("task-04's anomaly", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-04"
    });
    rig.s.append(
        "task-03-status",
        "step 2 self-correction: rewrote the parser\n",
    );
    m.wait_json("started by the anomaly", |v| {
        pipeline(v, "on-correction", "started")
    });
    m.wait_json("its step ran", |v| {
        pipeline(v, "on-correction", "completed")
    });
    assert_eq!(
        std::fs::read_to_string(rig.s.root().join("checked")).unwrap(),
        "task-03 self-correction"
    );
    // Started once: the task-04 anomaly came first and did not start it.
    assert_eq!(
        m.seen
            .iter()
            .filter(|l| l.contains("\"on-correction\"") && l.contains("\"started\""))
            .count(),
        1
    );
}

#[test]
fn a_step_timeout_ends_the_command_and_what_it_started() {
    let rig = Rig::new();
    let marker = "30.7771";
    rig.define("slow", &json!({
        "trigger": {"type": "immediate"},
        "steps": [{"type": "command", "command": "sh",
                   "params": {"args": ["-c", format!("sleep {marker}; true")], "timeoutMs": 500},
                   "onError": "skip"}],
        "safety": {"maxIterations": 1}
    }));
    let mut m = rig.host();
    let step = m.wait_json("the step times out", |v| pipeline(v, "slow", "step"));
    assert!(
        step["outcome"].as_str().unwrap().contains("timed out"),
        "{step}"
    );
    assert_eq!(running_with(marker), Vec::<String>::new());
}

#[test]
fn stop_and_exit_end_the_whole_process_tree_of_a_step() {
    let rig = Rig::new();
    let marker = "30.7772";
    let def = json!({
        "steps": [{"type": "command", "command": "sh",
                   "params": {"args": ["-c", format!("sleep {marker} & sleep {marker}; true")]}}],
        "safety": {"maxIterations": 1}
    });
    rig.define("tree", &def);
    let mut m = rig.host();
    m.wait_json("hosted", |v| event(v) == "task");
    let (code, _, err) = rig.sentinel(&["start", "tree"]);
    assert_eq!(code, 0, "{err}");
    m.wait_json("running", |v| pipeline(v, "tree", "started"));
    // The step's processes exist before the stop…
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while running_with(marker).len() < 3 {
        assert!(std::time::Instant::now() < end, "the step never started");
        std::thread::yield_now();
    }
    let (code, _, err) = rig.sentinel(&["stop", "tree"]);
    assert_eq!(code, 0, "{err}");
    m.wait_json("stopped", |v| pipeline(v, "tree", "stopped"));
    // …and none after it.
    assert_eq!(running_with(marker), Vec::<String>::new());

    // maestro's own exit ends a running step's tree too.
    let (code, _, err) = rig.sentinel(&["start", "tree"]);
    assert_eq!(code, 0, "{err}");
    m.wait_json("running again", |v| pipeline(v, "tree", "started"));
    while running_with(marker).len() < 3 {
        assert!(
            std::time::Instant::now() < end,
            "the step never started again"
        );
        std::thread::yield_now();
    }
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);
    assert_eq!(running_with(marker), Vec::<String>::new());
}

#[test]
fn run_history_is_kept_across_a_restart() {
    let rig = Rig::new();
    rig.define("twice", &json!({
        "trigger": {"type": "immediate"},
        "steps": [
            {"type": "command", "command": "sh", "params": {"args": ["-c", "echo checked the build"]}},
            {"type": "command", "command": "sh", "params": {"args": ["-c", "echo oops >&2; exit 4"]}}
        ],
        "safety": {"maxIterations": 1}
    }));
    let runs = || {
        let (code, out, err) = rig.sentinel(&["show", "twice", "--runs", "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(out.trim()).unwrap()["runs"]
            .as_array()
            .unwrap()
            .clone()
    };
    for n in 1..=2 {
        let mut m = rig.host();
        m.wait_json("the run ends", |v| pipeline(v, "twice", "completed"));
        m.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(m.wait_exit(), 0);
        let runs = runs();
        assert_eq!(runs.len(), n, "{runs:?}");
        let steps = runs[0]["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert_eq!(steps[0]["outcome"], "exit 0");
        assert!(
            steps[0]["excerpt"]
                .as_str()
                .unwrap()
                .contains("checked the build")
        );
        assert_eq!(steps[1]["outcome"], "exit 4");
        assert!(steps[1]["excerpt"].as_str().unwrap().contains("oops"));
        assert!(steps[0]["duration_ms"].is_u64());
    }
    // Newest first.
    let runs = runs();
    assert!(
        runs[0]["started"].as_str() > runs[1]["started"].as_str(),
        "{runs:?}"
    );
    // The list says what the seed's stored entity counts.
    let (code, out, err) = rig.sentinel(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(out.trim()).unwrap();
    let twice = listed["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "twice")
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(twice["runCount"], 2, "{twice}");
    assert_eq!(twice["lastRunAt"], runs[0]["started"], "{twice}");
    assert!(twice["averageDurationMs"].is_number(), "{twice}");
    // And so does `show`.
    let (code, out, err) = rig.sentinel(&["show", "twice", "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(shown["runCount"], 2, "{shown}");
}

/// `safety.maxStepTimeoutMs`: a step that runs longer is a step error naming the budget
/// (then `onError` as for any error), and its process is ended; `trigger.cronExpression`
/// is accepted at trust, a bad one refused naming the field.
#[test]
fn a_step_past_max_step_timeout_is_an_error_and_cron_schedules_are_read() {
    let rig = Rig::new();
    let marker = rig.marker("slow");
    rig.define("slow", &json!({
        "trigger": {"type": "immediate"},
        "steps": [{"type": "command", "command": "sh",
                   "params": {"args": ["-c", format!("echo $$ > {}; exec sleep 30", marker.display())]}}],
        "safety": {"maxIterations": 1, "maxStepTimeoutMs": 300}
    }));
    let mut m = rig.host();
    let step = m.wait_json("the step", |v| pipeline(v, "slow", "step"));
    let said = step["outcome"].as_str().unwrap_or_default();
    assert!(said.contains("maxStepTimeoutMs (300 ms)"), "{step}");
    m.wait_json("failed", |v| pipeline(v, "slow", "failed"));
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"))
    {
        assert!(
            std::time::Instant::now() < end,
            "the step's process was not ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(m);
    rig.define(
        "every5",
        &json!({
            "trigger": {"type": "schedule", "cronExpression": "*/5 * * * *"},
            "steps": [{"type": "command", "command": "true"}],
            "safety": {"maxIterations": 1}
        }),
    );
    rig.write(
        "bad",
        &json!({
            "trigger": {"type": "schedule", "cronExpression": "*/5 * *"},
            "steps": [{"type": "command", "command": "true"}],
            "safety": {"maxIterations": 1}
        }),
    );
    let (code, out, err) = rig.sentinel(&["trust", "bad"]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("trigger.cronExpression"), "{err}");
}

/// `safety.maxMemoryMb`: a step's processes are held to the budget; one that wants
/// 500 MB under 64 fails as a step error naming the budget, the same step under 1024
/// runs, and maestro goes on.
#[test]
fn a_step_past_max_memory_is_an_error_naming_the_budget() {
    let Some(python) = crate::common::find_on_path("python3") else {
        eprintln!("skipped: needs python3 to allocate 500 MB");
        return;
    };
    let rig = Rig::new();
    let step = |name: &str, mb: u64| {
        json!({
            "name": name,
            "trigger": {"type": "immediate"},
            "steps": [{"type": "command", "command": python.display().to_string(),
                       "params": {"args": ["-c", "b = bytearray(500 * 1024 * 1024); print(len(b))"]}}],
            "safety": {"maxIterations": 1, "maxMemoryMb": mb}
        })
    };
    rig.define("small", &step("small", 64));
    rig.define("roomy", &step("roomy", 1024));
    let mut m = rig.host();
    let small = m.wait_json("the small step", |v| pipeline(v, "small", "step"));
    let said = small["outcome"].as_str().unwrap_or_default();
    assert!(said.contains("safety.maxMemoryMb (64 MB"), "{small}");
    m.wait_json("failed", |v| pipeline(v, "small", "failed"));
    let roomy = m.wait_json("the roomy step", |v| pipeline(v, "roomy", "step"));
    assert!(
        !roomy["outcome"]
            .as_str()
            .unwrap_or_default()
            .contains("maxMemoryMb"),
        "{roomy}"
    );
    m.wait_json("completed", |v| pipeline(v, "roomy", "completed"));
    assert!(m.child.try_wait().unwrap().is_none(), "maestro goes on");
}

/// `safety.onTimeout: "pause"`: at its time limit the run pauses instead of stopping,
/// its iteration kept, and `sentinel resume` goes on from there; a value other than
/// stop or pause is refused at trust, naming the field.
#[test]
fn a_run_paused_at_its_time_limit_resumes_where_it_was() {
    let rig = Rig::new();
    let step = json!({"type": "command", "command": "sh", "params": {"args": ["-c", "echo tick >> out.txt"]}});
    rig.write(
        "bad",
        &json!({"steps": [step.clone()], "safety": {"timeoutMs": 400, "onTimeout": "later"}}),
    );
    let (code, _, err) = rig.sentinel(&["trust", "bad"]);
    assert_ne!(code, 0);
    assert!(err.contains("safety.onTimeout"), "{err}");
    rig.define(
        "tick",
        &json!({
            "trigger": {"type": "immediate"},
            "steps": [step],
            "loop": {"type": "continuous", "intervalMs": 50},
            "safety": {"timeoutMs": 400, "onTimeout": "pause"}
        }),
    );
    let mut m = rig.host();
    let paused = m.wait_json("paused at the limit", |v| pipeline(v, "tick", "paused"));
    assert!(
        paused["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("timeoutMs")),
        "{paused}"
    );
    let at = paused["iteration"].as_u64().expect("its iteration");
    assert!(at >= 1, "{paused}");
    assert_eq!(rig.sentinel(&["resume", "tick"]).0, 0);
    m.wait_json("resumed", |v| pipeline(v, "tick", "resumed"));
    let next = m.wait_json("the next iteration", |v| pipeline(v, "tick", "iteration"));
    assert_eq!(
        next["iteration"].as_u64(),
        Some(at + 1),
        "went on from there: {next}"
    );
    assert!(
        !m.seen
            .iter()
            .any(|l| l.contains("\"failed\"") || l.contains("\"stopped\"")),
        "{:?}",
        m.seen
    );
}
