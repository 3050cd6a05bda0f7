//! Where a run looks: the project folder, its database and log folder, and the resolved
//! settings, from the global flags. Every problem here is a usage error (exit 2).

use std::path::{Path, PathBuf};

use crate::cli::args::GlobalArgs;
use crate::cli::error::CliError;
use crate::core::runtime::{CoreConfig, Presenter};
use crate::settings::{Overrides, Settings, config_path};

/// Where a watched project is: a folder here, or one on another host.
#[derive(Debug, Clone)]
pub enum Place {
    Local(Project),
    Remote(crate::remote::RemoteProject),
}

impl Place {
    /// The project `--project` or `[projects]` names: `ssh://…` is remote.
    pub fn at(dir: &Path, args: &GlobalArgs) -> Result<Self, CliError> {
        let text = dir.to_string_lossy();
        if crate::remote::RemoteProject::is_remote(&text) {
            return crate::remote::RemoteProject::parse(&text)
                .map(Self::Remote)
                .map_err(crate::cli::error::usage);
        }
        Project::at(Some(&dir.to_path_buf()), args).map(Self::Local)
    }

    /// Its name in the projects bar and the `project` field: the folder's, or the
    /// address as the operator wrote it.
    pub fn name(&self) -> String {
        match self {
            Self::Local(p) => p.name(),
            Self::Remote(r) => r.to_string(),
        }
    }

    /// Its full name, when two short ones are the same.
    pub fn full_name(&self) -> String {
        match self {
            Self::Local(p) => p.root.display().to_string(),
            Self::Remote(r) => r.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub db: PathBuf,
    pub temp: PathBuf,
}

impl Project {
    pub fn from_args(args: &GlobalArgs) -> Result<Self, CliError> {
        Self::at(args.project()?, args)
    }

    /// The project at `dir` (none: the current folder), with the flags' `--db` and
    /// `--temp`.
    pub fn at(dir: Option<&PathBuf>, args: &GlobalArgs) -> Result<Self, CliError> {
        let root = match dir {
            Some(p) => p.clone(),
            None => std::env::current_dir().map_err(|e| {
                CliError::Usage(format!(
                    "cannot read the current directory ({e}); pass --project DIR."
                ))
            })?,
        };
        if !root.is_dir() {
            return Err(CliError::Usage(format!(
                "the project folder {} does not exist or is not a folder. Pass --project with the folder that holds comms.db and temp/.",
                root.display()
            )));
        }
        // One canonical root for everything after this point: the kernel names changed
        // files by absolute paths, and a relative root never matched them.
        let root = std::fs::canonicalize(&root).map_err(|e| {
            CliError::Usage(format!(
                "cannot resolve the project folder {} ({e}). Pass --project with a folder you can read.",
                root.display()
            ))
        })?;
        let db = match &args.db {
            Some(p) => resolved("--db", p)?,
            None => root.join("comms.db"),
        };
        let temp = match &args.temp {
            Some(p) => resolved("--temp", p)?,
            None => root.join("temp"),
        };
        for folder in [&root, &temp] {
            crate::core::paths::carry_over_legacy_key(&crate::core::paths::ProjectKey::of(folder));
        }
        Ok(Self { root, db, temp })
    }

    /// A remote project's folder, as its local hub names it (nothing here is read).
    pub fn of_remote(remote: &crate::remote::RemoteProject) -> Self {
        let root = PathBuf::from(&remote.path);
        Self {
            db: root.join("comms.db"),
            temp: root.join("temp"),
            root,
        }
    }

    /// The core's configuration for this project and these settings.
    pub fn core_config(&self, settings: &Settings) -> CoreConfig {
        CoreConfig {
            project: self.root.clone(),
            db: self.db.clone(),
            temp: self.temp.clone(),
            rules: settings.rules,
            db_writes: settings.db_writes,
            reading: settings.reading,
            souffleur_role: false,
            presenter: Presenter::Lines,
            event_log_bytes: settings.event_log_bytes,
            context_windows: settings.context_windows.clone(),
            prices: settings.prices.clone(),
            claude_dir: None,
        }
    }

    /// Hosts this project's pipelines from this process, unless another one does. The
    /// host hears the core's happenings on its bus.
    pub fn host_pipelines(
        &self,
        settings: &Settings,
        core: &crate::core::runtime::RunningCore,
    ) -> Option<crate::core::pipeline::host::HostHandle> {
        crate::core::pipeline::host::start(
            &self.root,
            settings.llm.clone(),
            settings.pipeline_limits,
            core.events.clone(),
            core.bus.clone(),
        )
    }

    /// What the dashboard's task actions act on.
    pub fn action_access(&self, settings: &Settings) -> crate::tui::ActionAccess {
        crate::tui::ActionAccess {
            target: crate::core::actions::Target {
                root: self.root.clone(),
                db: self.db.clone(),
                temp: self.temp.clone(),
                window_programs: crate::core::windows::window_programs(&settings.launch),
            },
            launch: settings.launch.clone(),
            recovery: settings.souffleur.recovery.clone(),
            remote: None,
        }
    }

    /// The project's name for titles: its folder name.
    pub fn name(&self) -> String {
        std::fs::canonicalize(&self.root)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| self.root.display().to_string())
    }
}

/// An absolute path whose folder is resolved (symlinks, `.`, `..`) and whose last part
/// is kept as given: `temp/` may be a symlink that is later pointed elsewhere, or may
/// not exist yet.
fn resolved(flag: &str, path: &Path) -> Result<PathBuf, CliError> {
    let absolute = std::path::absolute(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot resolve {flag} {} ({e}); pass an absolute path.",
            path.display()
        ))
    })?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Ok(std::fs::canonicalize(&absolute).unwrap_or(absolute));
    };
    Ok(std::fs::canonicalize(parent)
        .map(|p| p.join(name))
        .unwrap_or(absolute))
}

/// Asks before a destructive action: on a terminal, y/N; without one, `--yes` is needed.
pub fn confirm(question: &str, yes: bool) -> Result<(), CliError> {
    use std::io::IsTerminal;
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "{question} This is destructive: pass --yes to confirm without a terminal."
        )));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(CliError::Usage("not confirmed; nothing done.".into()))
    }
}

/// Reads the configuration file (if any) and applies the flags.
pub fn load_settings(args: &GlobalArgs) -> Result<Settings, CliError> {
    let overrides = Overrides {
        stall_after: args.stall_after,
        spike_threshold: args.spike_threshold,
        task_stale_after: args.task_stale_after,
        conductor_stale_after: args.conductor_stale_after,
        report_to_db: args.report_to_db,
        theme: args.theme.clone(),
        metrics: args.metrics.clone(),
        // The environment's word is read here, with the flags, and nowhere else.
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    };
    let text = match config_path(args.config.as_deref()) {
        Some((path, _)) => Some((
            std::fs::read_to_string(&path).map_err(|e| {
                CliError::Usage(format!(
                    "cannot read the configuration file {} ({e}). Fix the path given to --config or MAESTRO_CONFIG, or remove it to use the defaults.",
                    path.display()
                ))
            })?,
            path,
        )),
        None => None,
    };
    Settings::resolve(
        text.as_ref().map(|(t, p)| (p.as_path(), t.as_str())),
        &overrides,
    )
    .map_err(|e| CliError::Usage(e.0))
}
