//! Configuration: the embedded `config/default.toml`, then the user's file, then flags.
//!
//! [`ConfigFile`] mirrors the TOML with every field optional, so a user file only names
//! what it changes; [`Settings`] is the validated result the rest of maestro reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod resolve;

/// The embedded defaults, printed by `maestro config default`.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub sentinel: SentinelSection,
    #[serde(default)]
    pub tasks: TasksSection,
    #[serde(default)]
    pub souffleur: SouffleurSection,
    #[serde(default)]
    pub launch: LaunchSection,
    #[serde(default)]
    pub logs: LogsSection,
    #[serde(default)]
    pub ui: UiSection,
    /// Key bindings per mode, merged over the defaults by the dashboard.
    #[serde(default)]
    pub keys: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub pipelines: PipelinesSection,
    #[serde(default)]
    pub metrics: MetricsSection,
    #[serde(default)]
    pub budget: BudgetSection,
    /// Projects watched when no `--project` is given: name → folder.
    #[serde(default)]
    pub projects: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub sessions: SessionsSection,
    #[serde(default)]
    pub remote: RemoteSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSection {
    pub ssh: Option<Vec<String>>,
    pub maestro: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    pub task_usd: Option<f64>,
    pub orchestration_usd: Option<f64>,
    pub context_percent: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsSection {
    pub context_window: Option<u64>,
    pub context_windows: Option<std::collections::BTreeMap<String, u64>>,
    pub prices: Option<std::collections::BTreeMap<String, PriceEntry>>,
}

/// `[sessions.prices]` entry: USD per million tokens.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentinelSection {
    pub stall_after: Option<String>,
    pub spike_threshold: Option<u8>,
    pub report_to_db: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksSection {
    pub stale_after: Option<String>,
    pub forecast_lead: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SouffleurSection {
    pub conductor_stale_after: Option<String>,
    pub initial_wait: Option<String>,
    pub poll: Option<String>,
    pub teammate_initial_wait: Option<String>,
    pub teammate_poll: Option<String>,
    pub watcher_stale_after: Option<String>,
    pub max_no_progress_recoveries: Option<u32>,
    pub max_external_permission: Option<String>,
    pub kill_grace: Option<String>,
    pub claude_projects_dir: Option<String>,
    pub export_dir: Option<String>,
    pub compact_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSection {
    pub terminal: Option<Vec<String>>,
    pub claude: Option<Vec<String>>,
    pub claude_export: Option<Vec<String>>,
    pub lethe: Option<Vec<String>>,
    pub musician_prompt: Option<String>,
    pub kitty_remote_control: Option<bool>,
    pub kitty_socket: Option<String>,
    pub window_columns: Option<u16>,
    pub window_lines: Option<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsSection {
    pub max_line: Option<usize>,
    pub fallback_poll: Option<String>,
    pub event_log_mib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiSection {
    pub theme: Option<String>,
    pub notifications: Option<String>,
    pub notify_command: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    pub listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinesSection {
    pub llm: Option<Vec<String>>,
    pub history_runs: Option<usize>,
    pub max_processes: Option<usize>,
    pub max_processes_per_run: Option<usize>,
    pub output_kib: Option<usize>,
}

/// A configuration problem, worded for the person who has to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Resolved configuration: every value present and checked.
pub use crate::core::pipeline::PipelineLimits;
pub use crate::core::windows::LaunchTemplates;

#[derive(Debug, Clone)]
pub struct Settings {
    /// What the hub judges by (the Sentinel's thresholds, the staleness limits, the
    /// forecast lead, the budgets), built once from the file and the flags: the hub,
    /// the dashboard, the metrics and the Souffleur read this object.
    pub rules: crate::core::hub::Rules,
    /// What is written to the project's database (`report_to_db`, `history_runs`).
    pub db_writes: crate::core::sources::db::DbWrites,
    pub souffleur: SouffleurTimings,
    pub launch: LaunchTemplates,
    /// How the sources read (`[logs] max_line`, `fallback_poll`).
    pub reading: crate::core::sources::Reading,
    /// Bound of each of the two event-log files, in bytes (0: maestro records nothing).
    pub event_log_bytes: u64,
    pub theme: String,
    /// No colours (`NO_COLOR`): the monochrome theme whatever `theme` says.
    pub no_color: bool,
    pub notifications: String,
    pub notify_command: Vec<String>,
    pub keys: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    pub llm: Option<Vec<String>>,
    pub pipeline_limits: PipelineLimits,
    /// Where `/metrics` is served (`[metrics] listen`; `--metrics` wins), if anywhere.
    pub metrics_listen: Option<String>,
    pub context_windows: crate::core::sessions::ContextWindows,
    /// `[projects]`: (name, folder), in name order.
    pub projects: Vec<(String, PathBuf)>,
    /// The list prices, with `[sessions.prices]` over them.
    pub prices: crate::core::sessions::prices::PriceTable,
    /// `[remote]`: how projects on other hosts are reached.
    pub remote: crate::remote::RemoteSettings,
}

/// `[souffleur]`, built into what the role and a recovery take whole.
#[derive(Debug, Clone)]
pub struct SouffleurTimings {
    /// The role's waits and polls, with the deadlines it judges heartbeats by.
    pub role: crate::core::watchdog::role::RoleTimings,
    /// A recovery's grace, folders and waits.
    pub recovery: crate::core::recovery::RecoveryTimings,
    /// The highest permission mode a relaunched Conductor may get: only the user's own
    /// configuration sets it; a project's `.orchestra_configs/souffleur` may only lower it.
    pub max_external_permission: crate::core::recovery::payload::Permission,
}

/// Flag values that override the files (each `None` when not given).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub stall_after: Option<Duration>,
    pub spike_threshold: Option<u8>,
    pub task_stale_after: Option<Duration>,
    pub conductor_stale_after: Option<Duration>,
    pub report_to_db: bool,
    pub theme: Option<String>,
    /// `--metrics`: where `/metrics` is served, over `[metrics] listen`.
    pub metrics: Option<String>,
    /// `NO_COLOR` set and not empty: no colours, whatever the theme.
    pub no_color: bool,
}

pub(crate) fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    toml::from_str(text).map_err(|e| {
        ConfigError(format!(
            "{} is not a valid maestro configuration: {}. `maestro config default` prints a valid file to start from.",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

/// Parses `250ms`, `2s`, `5m`, `1h` (and humantime's other forms, like `1m 30s`).
/// `[remote]`, checked: an argv to run and a command to name.
pub(crate) fn remote_settings(
    ssh: Vec<String>,
    maestro: String,
    file: &Path,
) -> Result<crate::remote::RemoteSettings, ConfigError> {
    if ssh.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(ConfigError(format!(
            "{}: [remote] ssh needs the ssh client's argv, e.g. ssh = [\"ssh\"] or [\"ssh\", \"-F\", \"/path/to/config\"].",
            file.display()
        )));
    }
    if maestro.trim().is_empty() || maestro.contains(['\n', '\r', '\0']) {
        return Err(ConfigError(format!(
            "{}: [remote] maestro needs the maestro command on the remote hosts on one line, e.g. maestro = \"maestro\" or \"~/.cargo/bin/maestro\".",
            file.display()
        )));
    }
    Ok(crate::remote::RemoteSettings { ssh, maestro })
}

pub fn parse_duration(text: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(text.trim())
}

/// `~/x` → `$HOME/x`; anything else unchanged.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), directories::BaseDirs::new()) {
        (Some(rest), Some(dirs)) => dirs.home_dir().join(rest),
        _ => PathBuf::from(path),
    }
}

/// The config file to read: `--config`, else `MAESTRO_CONFIG`, else the platform's
/// `<config dir>/maestro/config.toml` if it exists. `explicit` is true when the user
/// named it, so a missing file is an error rather than "no file".
pub fn config_path(flag: Option<&Path>) -> Option<(PathBuf, bool)> {
    if let Some(p) = flag {
        return Some((p.to_path_buf(), true));
    }
    if let Some(p) = std::env::var_os("MAESTRO_CONFIG").filter(|v| !v.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let dirs = directories::ProjectDirs::from("", "", "maestro")?;
    let p = dirs.config_dir().join("config.toml");
    p.is_file().then_some((p, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_contract() {
        let s = Settings::resolve(None, &Overrides::default()).unwrap();
        assert_eq!(s.rules.sentinel.stall_after, Duration::from_secs(300));
        assert_eq!(s.rules.sentinel.spike_threshold, 15);
        assert!(!s.db_writes.report_to_db);
        assert_eq!(s.rules.deadlines.task_stale_after, Duration::from_secs(540));
        assert_eq!(
            s.rules.deadlines.conductor_stale_after,
            Duration::from_secs(240)
        );
        assert_eq!(s.souffleur.role.initial_wait, Duration::from_secs(240));
        assert_eq!(s.souffleur.role.teammate_poll, Duration::from_secs(180));
        assert_eq!(s.souffleur.role.max_no_progress, 3);
        assert_eq!(s.launch.claude, ["env", "-u", "CLAUDECODE", "claude"]);
    }

    /// `NO_COLOR` reaches the dashboard through the one resolution, as a flag does.
    #[test]
    fn no_color_is_resolved_with_the_flags() {
        let plain = Settings::resolve(None, &Overrides::default()).unwrap();
        assert!(!plain.no_color);
        let flags = Overrides {
            no_color: true,
            ..Overrides::default()
        };
        assert!(Settings::resolve(None, &flags).unwrap().no_color);
    }

    /// `--metrics` goes through the one resolution and wins over `[metrics] listen`.
    #[test]
    fn the_metrics_flag_wins_over_the_file() {
        let user = "[metrics]\nlisten = \"127.0.0.1:9000\"\n";
        let file = Some((Path::new("u.toml"), user));
        let s = Settings::resolve(file, &Overrides::default()).unwrap();
        assert_eq!(s.metrics_listen.as_deref(), Some("127.0.0.1:9000"));
        let flags = Overrides {
            metrics: Some("9100".into()),
            ..Overrides::default()
        };
        let s = Settings::resolve(file, &flags).unwrap();
        assert_eq!(s.metrics_listen.as_deref(), Some("9100"));
    }

    #[test]
    fn user_file_then_flags() {
        let user = "[sentinel]\nstall_after = \"2s\"\nspike_threshold = 20\n[tasks]\nstale_after = \"1m\"\n";
        let flags = Overrides {
            spike_threshold: Some(30),
            ..Overrides::default()
        };
        let s = Settings::resolve(Some((Path::new("u.toml"), user)), &flags).unwrap();
        assert_eq!(s.rules.sentinel.stall_after, Duration::from_secs(2));
        assert_eq!(s.rules.sentinel.spike_threshold, 30);
        assert_eq!(s.rules.deadlines.task_stale_after, Duration::from_secs(60));
        assert_eq!(
            s.rules.deadlines.conductor_stale_after,
            Duration::from_secs(240)
        );
    }

    #[test]
    fn bad_files_name_file_key_and_form() {
        let cases = [
            (
                "[sentinel]\nstall_after = \"soon\"\n",
                "sentinel.stall_after",
            ),
            ("[sentinel]\nstal_after = \"5m\"\n", "stal_after"),
            (
                "[sentinel]\nspike_threshold = \"high\"\n",
                "spike_threshold",
            ),
            ("[sentinel]\nspike_threshold = 150\n", "0–100"),
            ("[launch]\nterminal = []\n", "launch.terminal"),
            ("not toml at all [", "bad.toml"),
        ];
        for (text, expected) in cases {
            let err = Settings::resolve(Some((Path::new("bad.toml"), text)), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains("bad.toml"), "{err}");
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    #[test]
    fn durations_in_the_documented_forms() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    /// The README's example configuration must stay a valid file.
    #[test]
    fn readme_example_config_is_valid() {
        let readme = include_str!("../../docs/guide.md");
        let start = readme.find("```toml\n").expect("README has a toml example") + 8;
        let end = start + readme[start..].find("```").expect("closed");
        Settings::resolve(
            Some((Path::new("docs/guide.md"), &readme[start..end])),
            &Overrides::default(),
        )
        .unwrap();
    }
}
