//! The ssh command line: the configured client, the host, and a remote command whose
//! every word is quoted for the remote shell (ssh joins its arguments into one string
//! that the host's shell parses: an unquoted path or message would be shell text).

use crate::remote::{RemoteProject, RemoteSettings};

/// Options for a link, which nobody watches as it connects: no password prompt in the
/// middle of the dashboard (keys and the agent only), and a dead peer noticed in 30 s.
/// They come after the configured argv, so an `-o` there wins (ssh keeps the first).
pub const LINK_OPTIONS: [&str; 6] = [
    "-o",
    "BatchMode=yes",
    "-o",
    "ServerAliveInterval=10",
    "-o",
    "ServerAliveCountMax=3",
];

/// Why ssh cannot be started for a remote project, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    #[error("[remote] ssh is empty: give the ssh client's argv, e.g. ssh = [\"ssh\"].")]
    NoSsh,
    #[error(
        "[remote] maestro is empty: give the maestro command on the remote host, e.g. maestro = \"maestro\"."
    )]
    NoMaestro,
    #[error("{arg:?} cannot be passed to the remote host (it holds a NUL byte).")]
    Nul { arg: String },
}

/// The argv that runs `maestro <args…>` on the project's host.
///
/// `extra` goes before the destination (`-t`, [`LINK_OPTIONS`]). The remote maestro is
/// `[remote] maestro` as written (the operator's own shell word: `~/bin/maestro` works);
/// every argument after it is quoted.
pub fn argv(
    settings: &RemoteSettings,
    project: &RemoteProject,
    extra: &[&str],
    args: &[String],
) -> Result<Vec<String>, SshError> {
    if settings.ssh.is_empty() {
        return Err(SshError::NoSsh);
    }
    if settings.maestro.trim().is_empty() {
        return Err(SshError::NoMaestro);
    }
    let mut argv = settings.ssh.clone();
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    if let Some(port) = project.port {
        argv.push("-p".into());
        argv.push(port.to_string());
    }
    // `--`: whatever the destination is, ssh reads no option from it.
    argv.push("--".into());
    argv.push(project.destination());
    let mut command = settings.maestro.clone();
    for a in args {
        let quoted = shlex::try_quote(a).map_err(|_| SshError::Nul { arg: a.clone() })?;
        command.push(' ');
        command.push_str(&quoted);
    }
    argv.push(command);
    Ok(argv)
}

/// Why a remote command failed, in the operator's words, from ssh's exit status and
/// the last lines it (or the remote shell) wrote on stderr; `None`: the remote maestro
/// ran and spoke for itself.
pub fn failure(
    settings: &RemoteSettings,
    project: &RemoteProject,
    status: Option<i32>,
    stderr: &str,
) -> Option<String> {
    let host = &project.host;
    let said = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(crate::core::text::printable)
        .unwrap_or_default();
    let maestro = &settings.maestro;
    match status {
        // ssh's own failures: its message says it best (authentication, host key, DNS).
        Some(255) => Some(if said.is_empty() {
            format!("ssh could not reach {host} (exit 255).")
        } else {
            format!("ssh could not reach {host}: {said}")
        }),
        Some(126 | 127) => Some(format!(
            "maestro is not installed on {host} (ran `{maestro}`): install it there with `cargo install --locked --path .` in a clone of maestro, or set [remote] maestro to its path on {host}."
        )),
        _ if stderr.contains("unrecognized subcommand 'serve'") => Some(format!(
            "the maestro on {host} (ran `{maestro}`) is too old for remote projects (it has no `serve`): update the maestro on {host} to {} or later.",
            crate::remote::wire::VERSION
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_remote_word_is_quoted_for_the_shell() {
        let p = RemoteProject::parse("ssh://ann@devbox:2222/srv/my%20orch").unwrap();
        let settings = RemoteSettings {
            ssh: vec!["ssh".into(), "-F".into(), "/tmp/cfg".into()],
            maestro: "~/bin/maestro".into(),
        };
        let args: Vec<String> = [
            "task",
            "approve",
            "task-02",
            "--message",
            "it's $(rm -rf ~); ok",
            "--project",
            &p.path,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let argv = argv(&settings, &p, &["-t"], &args).unwrap();
        assert_eq!(
            argv[..7],
            ["ssh", "-F", "/tmp/cfg", "-t", "-p", "2222", "--"].map(String::from)
        );
        assert_eq!(argv[7], "ann@devbox");
        let command = &argv[8];
        assert!(command.starts_with("~/bin/maestro task approve task-02 --message "));
        // What the remote shell would make of it: the same words back.
        let words = shlex::split(command).unwrap();
        assert_eq!(words[1..], args[..]);
    }

    #[test]
    fn failures_are_told_in_the_operators_words() {
        let p = RemoteProject::parse("ssh://devbox/srv/orch").unwrap();
        let s = RemoteSettings::default();
        let auth = failure(
            &s,
            &p,
            Some(255),
            "root@devbox: Permission denied (publickey).\n",
        );
        assert_eq!(
            auth.unwrap(),
            "ssh could not reach devbox: root@devbox: Permission denied (publickey)."
        );
        let missing = failure(
            &s,
            &p,
            Some(127),
            "bash: line 1: maestro: command not found\n",
        )
        .unwrap();
        assert!(
            missing.starts_with(
                "maestro is not installed on devbox (ran `maestro`): install it there"
            ),
            "{missing}"
        );
        let old = failure(&s, &p, Some(2), "error: unrecognized subcommand 'serve'\n").unwrap();
        assert!(
            old.contains("too old") && old.contains("update the maestro on devbox"),
            "{old}"
        );
        assert_eq!(
            failure(
                &s,
                &p,
                Some(2),
                "maestro: the project folder /x does not exist"
            ),
            None
        );
    }
}
