//! Sentinel pipelines (PROTOCOL.md §6, CONTRACT.md "Pipeline definition files"):
//! definitions as data, a condition language, a runner, and the host that loads the
//! definitions folder and takes commands.

pub mod edit;
pub mod expr;
pub mod host;
pub mod interpolate;
pub mod output;
pub mod runner;
pub mod spec;
pub mod trust;
pub mod views;

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
