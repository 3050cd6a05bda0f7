//! One run of maestro as it was asked: its flags, and the project and the settings they
//! name, each built once when a verb first needs it (ripgrep turns its flags into one
//! `HiArgs` the same way). Every verb reads these; none reads the flags into a project
//! or the configuration file again.

use std::cell::OnceCell;

use crate::cli::args::GlobalArgs;
use crate::cli::error::CliError;
use crate::cli::project::{Project, load_settings};
use crate::settings::Settings;

pub struct Invocation<'a> {
    pub global: &'a GlobalArgs,
    project: OnceCell<Result<Project, CliError>>,
    settings: OnceCell<Result<Settings, CliError>>,
}

impl<'a> Invocation<'a> {
    pub fn new(global: &'a GlobalArgs) -> Self {
        Self {
            global,
            project: OnceCell::new(),
            settings: OnceCell::new(),
        }
    }

    /// The project the flags name (`--project`, `--db`, `--temp`; none: this folder).
    pub fn project(&self) -> Result<&Project, CliError> {
        self.project
            .get_or_init(|| Project::from_args(self.global))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The settings: the configuration file with the flags over it, read once.
    pub fn settings(&self) -> Result<&Settings, CliError> {
        self.settings
            .get_or_init(|| load_settings(self.global))
            .as_ref()
            .map_err(Clone::clone)
    }
}
