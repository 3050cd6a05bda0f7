//! A command on a remote project (`maestro task approve task-02 --project
//! ssh://devbox/srv/orch --yes`) is the same command run by the maestro on that host,
//! over ssh, with the host's path in `--project`: the same checks, confirmations
//! (with a terminal at both ends, through ssh's own), output and exit status.
//!
//! What names a local file is settled here: `--config` is this maestro's (it holds
//! `[remote]`); a `--message-file` is read here and sent as `--message`.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::process::{Command, Stdio};

use crate::remote::{RemoteProject, RemoteSettings, ssh};

/// The arguments for the remote maestro: `args` (this command line without the
/// program) with `--project` pointing at the host's folder, `--config` left here and a
/// message file's text inlined.
pub fn remote_args(args: &[OsString], project: &RemoteProject) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let arg = arg.to_str().ok_or_else(|| {
            format!(
                "{} is not UTF-8 text: it cannot be sent to {}.",
                arg.display(),
                project.host
            )
        })?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg, None),
        };
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .and_then(|v| v.to_str().map(str::to_owned))
                    .ok_or_else(|| format!("{flag} needs a value.")),
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
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    format!("cannot read the message file {file} ({e}); pass a readable file or --message TEXT.")
                })?;
                out.push("--message".into());
                out.push(text);
            }
            _ => out.push(arg.to_owned()),
        }
    }
    Ok(out)
}

/// Runs the command on the host and returns its exit status; ssh's own failures and a
/// missing maestro are explained (exit 1).
pub fn run(
    settings: &RemoteSettings,
    project: &RemoteProject,
    args: &[String],
) -> Result<u8, String> {
    // A terminal at both ends: the remote maestro gets one too (its prompts, its TUI).
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let extra: &[&str] = if tty { &["-t"] } else { &["-T"] };
    let argv = ssh::argv(settings, project, extra, args)?;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {} ({e}): fix [remote] ssh.", argv[0]))?;
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
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for ssh ({e})."))?;
    if let Some(why) = ssh::failure(settings, project, status.code(), &said.join("\n")) {
        return Err(why);
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
            remote_args(&args, &p).unwrap(),
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
        let missing = remote_args(&os(&["task", "fix", "t", "--message-file", "/nope"]), &p);
        assert!(
            missing
                .unwrap_err()
                .starts_with("cannot read the message file /nope")
        );
    }
}
