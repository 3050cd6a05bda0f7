//! Sentinel pipelines (docs/orchestration.md §6, docs/cli.md "Pipeline definition files"):
//! definitions as data, a condition language, a runner, and the host that loads the
//! definitions folder and takes commands.

pub mod edit;
pub mod expr;
pub mod files;
pub mod host;
pub mod interpolate;
pub mod output;
pub mod program_text;
pub mod runner;
pub mod schedule;
pub mod spec;
pub mod trust;
pub mod views;

/// What pipelines may take: processes, captured output, history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineLimits {
    pub max_processes: usize,
    pub max_processes_per_run: usize,
    pub output_bytes: usize,
}

impl Default for PipelineLimits {
    fn default() -> Self {
        Self {
            max_processes: 32,
            max_processes_per_run: 8,
            output_bytes: 1024 * 1024,
        }
    }
}

/// The example pipelines shipped in `assets/sentinels/` (the demo installs them):
/// an anomaly-triggered check, a scheduled health check, a build-fix loop.
pub const EXAMPLES: [(&str, &str); 3] = [
    (
        "check-on-anomaly",
        include_str!("../../../assets/sentinels/check-on-anomaly.json"),
    ),
    (
        "health-check",
        include_str!("../../../assets/sentinels/health-check.json"),
    ),
    (
        "build-fix",
        include_str!("../../../assets/sentinels/build-fix.json"),
    ),
];

/// The shipped budget example (`assets/sentinels/freeze-over-budget.json`): not
/// installed by the demo and untrusted until the operator trusts it, since it
/// signals windows.
pub const BUDGET_EXAMPLE: (&str, &str) = (
    "freeze-over-budget",
    include_str!("../../../assets/sentinels/freeze-over-budget.json"),
);

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;

    #[test]
    fn the_budget_example_freezes_at_the_whole_task_budget_only() {
        let v: serde_json::Value = serde_json::from_str(BUDGET_EXAMPLE.1).expect("json");
        let def = spec::parse_definition(&v, BUDGET_EXAMPLE.0, "").expect("valid");
        let spec::Trigger::Event {
            name,
            filter: Some(filter),
        } = def.trigger
        else {
            panic!("an event trigger with a filter");
        };
        assert_eq!(name, "budget");
        let fires = |level: u8, budget: &str| {
            let event = json!({"event": "budget", "task_id": "task-03", "budget": budget, "level": level, "value": 5.1, "limit": 5.0});
            expr::eval_bool(&filter, &HashMap::from([("event".to_owned(), event)]))
                .expect("evaluates")
        };
        assert!(fires(100, "task_usd"));
        assert!(!fires(80, "task_usd"));
        assert!(!fires(100, "orchestration_usd"));
        assert!(BUDGET_EXAMPLE.1.contains("\"freeze\""));
    }
}
