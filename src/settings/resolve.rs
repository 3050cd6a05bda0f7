//! [`Settings::resolve`]: the defaults, then the user's file, then flags, one
//! configuration section at a time, each value checked with a message naming its origin.

use std::path::Path;
use std::time::Duration;

use super::{
    ConfigError, ConfigFile, DEFAULT_TOML, LaunchTemplates, Overrides, PipelineLimits, Settings,
    SouffleurTimings, expand_home, parse, parse_duration, remote_settings,
};
use crate::core::sessions::prices::{Price, PriceTable};
use crate::core::sessions::{Budgets, ContextWindows};

const EMBEDDED: &str = "<embedded default.toml>";

/// The user's value if present, else the default's.
macro_rules! pick {
    ($l:expr, $section:ident . $key:ident) => {
        $l.user
            .and_then(|c| c.$section.$key.clone())
            .or_else(|| $l.defaults.$section.$key.clone())
    };
}

/// The user's value if present, else the default's, which `config/default.toml` holds
/// for every key it names: the default lives there and nowhere else.
macro_rules! need {
    ($l:expr, $section:ident . $key:ident) => {
        pick!($l, $section.$key).ok_or_else(|| {
            ConfigError(format!(
                "{EMBEDDED} has no `{}.{}`: this build is broken; reinstall maestro.",
                stringify!($section),
                stringify!($key)
            ))
        })
    };
}

/// The two files a value may come from, and the name messages give the user's.
struct Layers<'a> {
    defaults: ConfigFile,
    user: Option<&'a ConfigFile>,
    file: &'a Path,
}

impl Layers<'_> {
    fn dur(&self, value: Option<String>, key: &str) -> Result<Duration, ConfigError> {
        let value = value.ok_or_else(|| ConfigError(format!("{key} has no value")))?;
        parse_duration(&value).map_err(|e| {
            ConfigError(format!(
                "{}: `{key} = \"{value}\"` is not a duration ({e}). Write it like \"250ms\", \"2s\", \"5m\" or \"1h\".",
                self.file.display()
            ))
        })
    }

    fn argv(&self, value: Option<Vec<String>>, key: &str) -> Result<Vec<String>, ConfigError> {
        match value {
            Some(v) if !v.is_empty() && !v[0].trim().is_empty() => Ok(v),
            _ => Err(ConfigError(format!(
                "{}: `{key}` must be a non-empty list of strings, the program first, e.g. [\"kitty\", \"--\"].",
                self.file.display()
            ))),
        }
    }

    fn budget(&self, value: Option<f64>, key: &str) -> Result<Option<f64>, ConfigError> {
        match value {
            Some(v) if !(v.is_finite() && v > 0.0) => Err(ConfigError(format!(
                "{}: `budget.{key} = {v}` must be a positive number (leave it out to turn the budget off).",
                self.file.display()
            ))),
            v => Ok(v),
        }
    }

    /// A flag's value if given, else the files' duration.
    fn dur_or(
        &self,
        flag: Option<Duration>,
        value: Option<String>,
        key: &str,
    ) -> Result<Duration, ConfigError> {
        flag.map_or_else(|| self.dur(value, key), Ok)
    }

    /// Where a value came from, for its message: the flag, the file, or the default.
    fn origin(&self, flag: Option<&str>, set_in_file: bool) -> String {
        match flag {
            Some(f) => format!("the command line: {f}"),
            None if set_in_file => self.file.display().to_string(),
            None => EMBEDDED.to_owned(),
        }
    }
}

impl Settings {
    /// Defaults, then `user` (already read, with the file name for messages), then flags.
    pub fn resolve(user: Option<(&Path, &str)>, flags: &Overrides) -> Result<Self, ConfigError> {
        let user = match user {
            Some((path, text)) => Some((path, parse(path, text)?)),
            None => None,
        };
        let l = Layers {
            defaults: parse(Path::new(EMBEDDED), DEFAULT_TOML)?,
            user: user.as_ref().map(|(_, c)| c),
            file: user.as_ref().map_or(Path::new(EMBEDDED), |(p, _)| *p),
        };
        let spike_threshold = flags
            .spike_threshold
            .map_or_else(|| need!(l, sentinel.spike_threshold), Ok)?;
        if spike_threshold > 100 {
            return Err(ConfigError(format!(
                "{}: `sentinel.spike_threshold = {spike_threshold}` is above 100; context values are percentages, so use 0–100.",
                l.file.display()
            )));
        }
        // What the hub judges by, built here once: every reader takes this object.
        let rules = crate::core::hub::Rules {
            sentinel: crate::core::sentinel::SentinelSettings {
                stall_after: l.dur_or(
                    flags.stall_after,
                    pick!(l, sentinel.stall_after),
                    "sentinel.stall_after",
                )?,
                spike_threshold,
            },
            deadlines: crate::core::hub::Deadlines {
                task_stale_after: l.dur_or(
                    flags.task_stale_after,
                    pick!(l, tasks.stale_after),
                    "tasks.stale_after",
                )?,
                conductor_stale_after: l.dur_or(
                    flags.conductor_stale_after,
                    pick!(l, souffleur.conductor_stale_after),
                    "souffleur.conductor_stale_after",
                )?,
                souffleur_stale_after: l.dur(
                    pick!(l, souffleur.watcher_stale_after),
                    "souffleur.watcher_stale_after",
                )?,
            },
            forecast_lead: l.dur(pick!(l, tasks.forecast_lead), "tasks.forecast_lead")?,
            budgets: budgets(&l)?,
        };
        let souffleur = souffleur(&l, rules.deadlines)?;
        let settings = Self {
            rules,
            prices: prices(&l)?,
            projects: projects(&l)?,
            context_windows: context_windows(&l)?,
            db_writes: crate::core::sources::db::DbWrites {
                report_to_db: flags.report_to_db || need!(l, sentinel.report_to_db)?,
                history_runs: need!(l, pipelines.history_runs)?.max(1),
            },
            launch: launch(&l, souffleur.max_external_permission)?,
            souffleur,
            reading: crate::core::sources::Reading {
                max_line: need!(l, logs.max_line)?.max(80),
                fallback_poll: l.dur(pick!(l, logs.fallback_poll), "logs.fallback_poll")?,
            },
            event_log_bytes: need!(l, logs.event_log_mib)?.saturating_mul(1 << 20),
            theme: flags.theme.clone().map_or_else(|| need!(l, ui.theme), Ok)?,
            no_color: flags.no_color,
            notifications: need!(l, ui.notifications)?,
            notify_command: need!(l, ui.notify_command)?,
            keys: l.user.map(|c| c.keys.clone()).unwrap_or_default(),
            llm: l.user.and_then(|c| c.pipelines.llm.clone()),
            metrics_listen: flags.metrics.clone().or(pick!(l, metrics.listen)),
            remote: remote_settings(need!(l, remote.ssh)?, need!(l, remote.maestro)?, l.file)?,
            pipeline_limits: pipeline_limits(&l)?,
        };
        check(&settings, flags, &l)?;
        Ok(settings)
    }
}

/// What a resolved value may not be, each refusal naming the value's own origin.
fn check(settings: &Settings, flags: &Overrides, l: &Layers) -> Result<(), ConfigError> {
    if settings.rules.sentinel.stall_after.is_zero() {
        let from = l.origin(
            flags.stall_after.map(|_| "`--stall-after`"),
            l.user.is_some_and(|c| c.sentinel.stall_after.is_some()),
        );
        return Err(ConfigError(format!(
            "{from}: the stall threshold (`--stall-after`, `sentinel.stall_after`) must be longer than zero; write it like \"5m\"."
        )));
    }
    if settings.reading.fallback_poll.is_zero() {
        let from = l.origin(None, l.user.is_some_and(|c| c.logs.fallback_poll.is_some()));
        return Err(ConfigError(format!(
            "{from}: `logs.fallback_poll` must be longer than zero; write it like \"2s\"."
        )));
    }
    if !matches!(settings.notifications.as_str(), "on" | "off" | "command") {
        return Err(ConfigError(format!(
            "{}: `ui.notifications = \"{}\"`: use \"on\", \"off\" or \"command\".",
            l.file.display(),
            settings.notifications
        )));
    }
    Ok(())
}

/// `[budget]`: only the user's file sets one.
fn budgets(l: &Layers) -> Result<Budgets, ConfigError> {
    let user = |f: fn(&ConfigFile) -> Option<f64>| l.user.and_then(f);
    Ok(Budgets {
        task_usd: l.budget(user(|c| c.budget.task_usd), "task_usd")?,
        orchestration_usd: l.budget(user(|c| c.budget.orchestration_usd), "orchestration_usd")?,
        context_percent: l.budget(user(|c| c.budget.context_percent), "context_percent")?,
    })
}

fn context_windows(l: &Layers) -> Result<ContextWindows, ConfigError> {
    Ok(ContextWindows {
        default: need!(l, sessions.context_window)?.max(1),
        by_model: need!(l, sessions.context_windows)?
            .into_iter()
            .map(|(k, v)| (k, v.max(1)))
            .collect(),
    })
}

/// `[sessions.prices]` over the list prices.
fn prices(l: &Layers) -> Result<PriceTable, ConfigError> {
    let mut overrides = Vec::new();
    for (prefix, e) in l
        .user
        .and_then(|c| c.sessions.prices.clone())
        .unwrap_or_default()
    {
        let values = [e.input, e.output, e.cache_write, e.cache_read];
        if prefix.is_empty() || values.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(ConfigError(format!(
                "{}: [sessions.prices] {prefix:?} needs a model id prefix and four prices of zero or more (USD per million tokens), e.g. {{ input = 3, output = 15, cache_write = 3.75, cache_read = 0.3 }}.",
                l.file.display()
            )));
        }
        overrides.push(Price {
            prefix,
            input: e.input,
            output: e.output,
            cache_write: e.cache_write,
            cache_read: e.cache_read,
        });
    }
    Ok(PriceTable::with_overrides(overrides))
}

/// `[projects]`: name → folder, each name one a screen and a label can hold.
fn projects(l: &Layers) -> Result<Vec<(String, std::path::PathBuf)>, ConfigError> {
    let mut projects = Vec::new();
    for (name, dir) in l.user.map(|c| c.projects.clone()).unwrap_or_default() {
        if name.is_empty() || name.chars().count() > 40 || name.chars().any(char::is_control) {
            return Err(ConfigError(format!(
                "{}: [projects] {name:?} is not a usable name: use 1 to 40 printable characters.",
                l.file.display()
            )));
        }
        projects.push((name, expand_home(&dir)));
    }
    Ok(projects)
}

fn souffleur(
    l: &Layers,
    deadlines: crate::core::hub::Deadlines,
) -> Result<SouffleurTimings, ConfigError> {
    let role = crate::core::watchdog::role::RoleTimings {
        deadlines,
        initial_wait: l.dur(pick!(l, souffleur.initial_wait), "souffleur.initial_wait")?,
        poll: l.dur(pick!(l, souffleur.poll), "souffleur.poll")?,
        teammate_initial_wait: l.dur(
            pick!(l, souffleur.teammate_initial_wait),
            "souffleur.teammate_initial_wait",
        )?,
        teammate_poll: l.dur(pick!(l, souffleur.teammate_poll), "souffleur.teammate_poll")?,
        max_no_progress: need!(l, souffleur.max_no_progress_recoveries)?,
    };
    let recovery = crate::core::recovery::RecoveryTimings {
        kill_grace: l.dur(pick!(l, souffleur.kill_grace), "souffleur.kill_grace")?,
        claude_projects_dir: expand_home(&need!(l, souffleur.claude_projects_dir)?),
        export_dir: expand_home(&need!(l, souffleur.export_dir)?),
        compact_timeout: l.dur(
            pick!(l, souffleur.compact_timeout),
            "souffleur.compact_timeout",
        )?,
    };
    let value = need!(l, souffleur.max_external_permission)?;
    let max_external_permission = crate::core::recovery::payload::Permission::parse_exact(&value)
        .ok_or_else(|| {
            ConfigError(format!(
                "{}: souffleur.max_external_permission = {value:?} is not a mode: use plan, default, acceptEdits or bypassPermissions.",
                l.file.display()
            ))
        })?;
    Ok(SouffleurTimings {
        role,
        recovery,
        max_external_permission,
    })
}

/// The launch templates; a Musician's window starts in acceptEdits, or the user's
/// ceiling where that is lower (`souffleur.max_external_permission = "default"`).
fn launch(
    l: &Layers,
    ceiling: crate::core::domain::permission::Permission,
) -> Result<LaunchTemplates, ConfigError> {
    Ok(LaunchTemplates {
        terminal: l.argv(pick!(l, launch.terminal), "launch.terminal")?,
        claude: l.argv(pick!(l, launch.claude), "launch.claude")?,
        claude_export: l.argv(pick!(l, launch.claude_export), "launch.claude_export")?,
        lethe: l.argv(pick!(l, launch.lethe), "launch.lethe")?,
        musician_prompt: need!(l, launch.musician_prompt)?,
        musician_permission: crate::core::domain::permission::Permission::AcceptEdits.min(ceiling),
        kitty_remote_control: need!(l, launch.kitty_remote_control)?,
        kitty_socket: pick!(l, launch.kitty_socket).filter(|s| !s.trim().is_empty()),
        window_columns: need!(l, launch.window_columns)?,
        window_lines: need!(l, launch.window_lines)?,
    })
}

fn pipeline_limits(l: &Layers) -> Result<PipelineLimits, ConfigError> {
    Ok(PipelineLimits {
        max_processes: need!(l, pipelines.max_processes)?.max(1),
        max_processes_per_run: need!(l, pipelines.max_processes_per_run)?.max(1),
        output_bytes: need!(l, pipelines.output_kib)?
            .clamp(1, 1 << 20)
            .saturating_mul(1024),
    })
}
