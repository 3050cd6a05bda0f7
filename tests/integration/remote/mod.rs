//! Remote projects over a real OpenSSH: Debian's `sshd` started on 127.0.0.1 with a
//! generated host key, an authorized key and a config file, all in a temporary folder
//! (`sshd.rs`); the "remote host" is this machine, reached only through ssh. Each test
//! skips with the reason when `sshd` is missing (`.ci/run` installs `openssh-server`).
#![allow(clippy::unwrap_used)]

mod beat;
mod failures;
mod hostile;
mod link;
mod screen;
mod sshd;

use std::path::Path;

use crate::common::{Running, Scratch, maestro};

/// A private sshd whose host runs this build of maestro, or `None` (said why).
pub fn sshd(test: &str) -> Option<sshd::Sshd> {
    sshd::Sshd::start(test, env!("CARGO_BIN_EXE_maestro"))
}

/// `ssh://devbox/<the scratch project's folder>`.
pub fn address(project: &Scratch) -> String {
    format!("ssh://devbox{}", project.root().display())
}

/// `maestro --no-tui --json` on the remote project, with the test's configuration.
pub fn watch(config: &Path, project: &Scratch) -> Running {
    watch_with(config, project, &[])
}

/// [`watch`] with more arguments.
pub fn watch_with(config: &Path, project: &Scratch, extra: &[&str]) -> Running {
    let mut cmd = maestro();
    cmd.args(["--no-tui", "--json", "--config"])
        .arg(config)
        .args(["--project", &address(project)])
        .args(extra);
    Running::spawn(cmd)
}
