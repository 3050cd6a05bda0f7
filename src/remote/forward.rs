//! A command on a remote project (`maestro task approve task-02 --project
//! ssh://devbox/srv/orch --yes`) is the same command run by the maestro on that host,
//! over ssh, with the host's path in `--project`: the same checks, confirmations
//! (with a terminal at both ends, through ssh's own), output and exit status.
//!
//! What names a local file is settled here: `--config` is this maestro's (it holds
//! `[remote]`); a `--message-file` is read here and sent as `--message`, or, past
//! [`INLINE_MAX`], on ssh's standard input as `--message-file -` (one argument of a
//! command line holds at most 128 KiB on Linux, and ssh hands the host's shell the
//! whole command as one).

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::process::{Command, Stdio};

use crate::remote::{RemoteProject, RemoteSettings, ssh};

/// The longest text sent inside the command line.
pub const INLINE_MAX: usize = 64 * 1024;

/// The command for the host's maestro, and what goes to its standard input.
#[derive(Debug, PartialEq, Eq)]
pub struct Forwarded {
    pub args: Vec<String>,
    pub stdin: Option<String>,
}

/// The arguments for the remote maestro: `args` (this command line without the
/// program) with `--project` pointing at the host's folder, `--config` left here and a
/// message file's text inlined (or, when long, sent on standard input).
/// Why a command cannot be carried to a remote project's host, or failed there.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("{arg} is not UTF-8 text: it cannot be sent to {host}.")]
    NotUtf8 { arg: String, host: String },
    #[error("{flag} needs a value.")]
    NeedsValue { flag: String },
    #[error(
        "cannot read the message file {file} ({source}); pass a readable file or --message TEXT."
    )]
    MessageFile {
        file: String,
        source: std::io::Error,
    },
    #[error(
        "the message is {kib} KiB, too long for a command line to {host} (at most {max_kib} KiB); write it to a file and pass --message-file F, which goes to the host on ssh's standard input."
    )]
    TooLong {
        kib: usize,
        host: String,
        max_kib: usize,
    },
    #[error(transparent)]
    Ssh(#[from] ssh::SshError),
    #[error("cannot run {program} ({source}): fix [remote] ssh.")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot wait for ssh ({0}).")]
    Wait(#[source] std::io::Error),
    /// ssh or the remote maestro failed: why, in the operator's words.
    #[error("{0}")]
    Failed(String),
}

pub fn remote_args(args: &[OsString], project: &RemoteProject) -> Result<Forwarded, ForwardError> {
    let mut out = Vec::with_capacity(args.len());
    let mut stdin = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let arg = arg.to_str().ok_or_else(|| ForwardError::NotUtf8 {
            arg: arg.display().to_string(),
            host: project.host.clone(),
        })?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg, None),
        };
        let mut value = || -> Result<String, ForwardError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .and_then(|v| v.to_str().map(str::to_owned))
                    .ok_or_else(|| ForwardError::NeedsValue {
                        flag: flag.to_owned(),
                    }),
            }
        };
        match flag {
            "--project" => {
                value()?;
                out.push("--project".into());
                out.push(project.path.clone());
            }
            "--config" => {
                value()?;
            }
            "--message-file" => {
                let file = value()?;
                let text = std::fs::read_to_string(&file)
                    .map_err(|source| ForwardError::MessageFile { file, source })?;
                if text.len() > INLINE_MAX {
                    out.push("--message-file".into());
                    out.push("-".into());
                    stdin = Some(text);
                } else {
                    out.push("--message".into());
                    out.push(text);
                }
            }
            "--message" => {
                let text = value()?;
                if text.len() > INLINE_MAX {
                    return Err(ForwardError::TooLong {
                        kib: text.len().div_ceil(1024),
                        host: project.host.clone(),
                        max_kib: INLINE_MAX / 1024,
                    });
                }
                out.push("--message".into());
                out.push(text);
            }
            _ => out.push(arg.to_owned()),
        }
    }
    Ok(Forwarded { args: out, stdin })
}

/// Runs the command on the host and returns its exit status; ssh's own failures and a
/// missing maestro are explained (exit 1).
pub fn run(
    settings: &RemoteSettings,
    project: &RemoteProject,
    command: &Forwarded,
) -> Result<u8, ForwardError> {
    // A terminal at both ends: the remote maestro gets one too (its prompts, its TUI),
    // unless its standard input carries the message.
    let tty = command.stdin.is_none()
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    let extra: &[&str] = if tty { &["-t"] } else { &["-T"] };
    let argv = ssh::argv(settings, project, extra, &command.args)?;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(if command.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ForwardError::Start {
            program: argv[0].clone(),
            source,
        })?;
    if let (Some(text), Some(mut input)) = (&command.stdin, child.stdin.take()) {
        // Written from its own thread: ssh may say something first, on stderr.
        let text = text.clone();
        std::thread::spawn(move || {
            let _ = input.write_all(text.as_bytes());
        });
    }
    // The remote side's messages are shown as they come; the last ones explain a failure.
    let mut said = Vec::new();
    if let Some(err) = child.stderr.take() {
        let mut stderr = std::io::stderr();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = writeln!(stderr, "{}", crate::core::text::printable(&line));
            said.push(line);
            if said.len() > 20 {
                said.remove(0);
            }
        }
    }
    let status = child.wait().map_err(ForwardError::Wait)?;
    if let Some(why) = ssh::failure(settings, project, status.code(), &said.join("\n")) {
        return Err(ForwardError::Failed(why));
    }
    Ok(status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_hosts_path_goes_and_local_files_stay() {
        let p = RemoteProject::parse("ssh://devbox/srv/orch").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let note = dir.path().join("approval-note");
        std::fs::write(&note, "looks good\n").unwrap();
        let note = note.to_str().unwrap();
        let args = os(&[
            "task",
            "approve",
            "task-02",
            "--project=ssh://devbox/srv/orch",
            "--config",
            "/home/me/maestro.toml",
            "--message-file",
            note,
            "--yes",
        ]);
        assert_eq!(
            remote_args(&args, &p).unwrap().args,
            [
                "task",
                "approve",
                "task-02",
                "--project",
                "/srv/orch",
                "--message",
                "looks good\n",
                "--yes"
            ]
        );
        let long = dir.path().join("long-note");
        std::fs::write(&long, "x".repeat(INLINE_MAX + 1)).unwrap();
        let sent = remote_args(
            &os(&["task", "fix", "t", "--message-file", long.to_str().unwrap()]),
            &p,
        )
        .unwrap();
        assert_eq!(sent.args[3..], ["--message-file", "-"]);
        assert_eq!(sent.stdin.map(|s| s.len()), Some(INLINE_MAX + 1));
        let refused = remote_args(
            &os(&[
                "task",
                "fix",
                "t",
                &format!("--message={}", "y".repeat(INLINE_MAX + 1)),
            ]),
            &p,
        )
        .unwrap_err()
        .to_string();
        assert!(refused.contains("--message-file F"), "{refused}");
        let missing = remote_args(&os(&["task", "fix", "t", "--message-file", "/nope"]), &p);
        assert!(
            missing
                .unwrap_err()
                .to_string()
                .starts_with("cannot read the message file /nope")
        );
    }
}
