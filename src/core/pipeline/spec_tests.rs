//! The definition checks: each problem named with its path.
use super::*;
use serde_json::json;

#[test]
fn the_seed_build_loop_shape_is_accepted() {
    let d = json!({
        "name": "build-fix-loop",
        "steps": [
            {"type": "command", "command": "cargo", "params": {"args": ["build"], "wait": false}, "outputTo": "build"},
            {"type": "watch", "executionId": "$build.executionId", "until": "finished", "outputTo": "buildOutput",
             "rules": [{"pattern": "error\\[E\\d+\\]", "classification": "error"}]},
            {"type": "condition", "check": "$buildOutput.exitCode === 0",
             "then": [{"type": "emit", "event": "built"}],
             "else": [{"type": "llm", "prompt": "Fix: $buildOutput.lines", "outputTo": "fix"}]}
        ],
        "loop": {"type": "until", "check": "$buildOutput.exitCode === 0"},
        "timeoutMs": 300_000
    });
    let def = parse_definition(&d, "x", "").unwrap();
    assert_eq!(def.steps.len(), 3);
    assert_eq!(def.timeout, Some(Duration::from_secs(300)));
    assert_eq!(def.trigger, Trigger::Manual);
}

#[test]
fn problems_name_their_json_path() {
    let base = |steps: Value| json!({"name": "x", "steps": steps, "safety": {"maxIterations": 3}});
    let table = [
        (base(json!([{"type": "command"}])), "steps[0].command"),
        (
            base(json!([{"type": "command", "command": "a"}, {"type": "command", "command": ""}])),
            "steps[1].command",
        ),
        (base(json!([{"type": "teleport"}])), "steps[0].type"),
        (
            base(json!([{"type": "condition", "check": "$a = 1"}])),
            "steps[0].check",
        ),
        (
            base(json!([{"type": "condition", "check": "true", "then": [{"type": "llm"}]}])),
            "steps[0].then[0].prompt",
        ),
        (
            base(
                json!([{"type": "watch", "executionId": "$x", "rules": [{"pattern": "(", "classification": "e"}]}]),
            ),
            "steps[0].rules[0].pattern",
        ),
        (
            base(json!([{"type": "command", "command": "a", "params": {"args": [1]}}])),
            "steps[0].params.args[0]",
        ),
        (
            base(json!([{"type": "sentinel", "definition": {"steps": []}}])),
            "steps[0].definition.safety",
        ),
        (json!({"steps": []}), "safety"),
        (
            json!({"steps": [], "timeoutMs": 10, "loop": {"type": "count"}}),
            "loop.max",
        ),
        (
            json!({"steps": [], "timeoutMs": 10, "trigger": {"type": "schedule", "cronExpression": "* * *"}}),
            "trigger.cronExpression",
        ),
        (
            json!({"steps": [], "timeoutMs": 10, "trigger": {"type": "schedule", "cronExpression": "61 * * * *"}}),
            "trigger.cronExpression",
        ),
        (
            json!({"steps": [], "timeoutMs": 10, "trigger": {"type": "schedule"}}),
            "trigger:",
        ),
    ];
    for (def, path) in table {
        let err = parse_definition(&def, "x", "").unwrap_err().to_string();
        let path = path.trim_end_matches(':');
        assert!(err.starts_with(&format!("{path}:")), "{path}: {err}");
    }
}

#[test]
fn the_shipped_examples_are_valid_definitions() {
    for (name, text) in crate::core::pipeline::EXAMPLES {
        let v: Value = serde_json::from_str(text).expect("JSON");
        parse_definition(&v, name, "").unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
