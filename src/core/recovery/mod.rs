//! Conductor recovery (docs/orchestration.md §4): the Lethe provider, the `claude_export` provider
//! and its `standard_compact` escalation. A recovery cycle runs at most one relaunch:
//! once a provider has started a Conductor generation, no other provider runs.

pub mod compact;
pub mod export;
pub mod gate;
pub mod launch;
pub mod payload;
pub mod transcript;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::process::Command;
use tokio::sync::mpsc;

use crate::core::domain::souffleur::{Provider, RecoveryKind, RecoveryOutcome, valid_session_id};
use crate::core::error::OwnFileError;
use crate::core::event::{CoreEvent, RecoveryStatus, RecoveryStep, RoleReport};
use crate::core::paused::Paused;
use crate::core::procs::{self, ProcessId};
use crate::core::store::role::RoleDb;
use compact::{BoundaryWatch, count_lines};
use launch::{LaunchError, Launcher, find_program, write_pid_file};
use payload::Resolved;
use transcript::find_transcript;

pub use crate::core::domain::CONDUCTOR_PID_FILE;
const EXPORT_TIMEOUT: Duration = Duration::from_secs(120);
const LETHE_TIMEOUT: Duration = Duration::from_secs(600);

/// `[souffleur]`'s grace, folders and waits for a recovery, built once from the
/// settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryTimings {
    /// How long an ended session has between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Claude Code's transcripts (`~/.claude/projects`).
    pub claude_projects_dir: PathBuf,
    /// Where `/export` writes the Conductor's conversation.
    pub export_dir: PathBuf,
    /// How long `standard_compact` waits for the `compact_boundary` line.
    pub compact_timeout: Duration,
}

/// Everything a recovery needs that does not change between cycles.
#[derive(Clone)]
pub struct RecoveryEnv {
    pub launcher: Launcher,
    pub temp: PathBuf,
    pub db: RoleDb,
    /// `[souffleur]`'s grace, folders and waits, as the settings built them.
    pub timings: RecoveryTimings,
    /// Where maestro keeps trimmed exports (its own data directory).
    pub trimmed_dir: PathBuf,
    pub force_compact: u64,
    pub events: mpsc::Sender<CoreEvent>,
}

/// One recovery cycle's inputs.
#[derive(Debug, Clone)]
pub struct RecoveryRequest {
    pub kind: RecoveryKind,
    pub conductor: Option<ProcessId>,
    pub session_id: String,
    /// The generation the relaunched Conductor will be (S2 after the original).
    pub generation: u32,
    pub resolved: Resolved,
}

#[derive(Debug, Clone)]
pub struct Recovered {
    pub outcome: RecoveryOutcome,
    pub conductor: Option<ProcessId>,
}

impl RecoveryEnv {
    async fn report(
        &self,
        provider: Provider,
        status: RecoveryStatus,
        generation: u32,
        pid: Option<i32>,
    ) {
        let _ = self
            .events
            .send(CoreEvent::Role(RoleReport::Recovery(RecoveryStep {
                provider,
                status,
                generation,
                pid,
            })))
            .await;
    }

    async fn note(&self, text: String) {
        let _ = self
            .events
            .send(CoreEvent::Role(RoleReport::Alert(text)))
            .await;
    }

    /// Starts a Conductor window and, once its session runs, ends the old Conductor and
    /// records the new window's PID in `temp/`. Until then the old one is kept (paused
    /// while the new session proves itself, so two Conductors never act at once); if
    /// the new one fails, the old runs on exactly as before.
    async fn launch_conductor(
        &self,
        generation: u32,
        args: &[String],
        old: Paused,
    ) -> Result<ProcessId, RecoveryError> {
        let held = match self.launcher.preflight() {
            Ok(()) => {
                self.launcher
                    .open_held(&conductor_title(generation), args)
                    .await
            }
            Err(e) => Err(e),
        };
        let mut old = old;
        let previous = crate::core::windows::previous(&self.temp, CONDUCTOR_PID_FILE);
        let released = match held {
            // The new window is the Conductor's from here: whoever looks while the old
            // one ends, or after this maestro died, finds it. Put back on a failure.
            Ok(held) => match write_pid_file(&self.temp, CONDUCTOR_PID_FILE, held.window().pid) {
                Ok(()) => {
                    // From here a dying maestro leaves the old Conductor to be ended.
                    old.committed();
                    held.release().await.map_err(RecoveryError::from)
                }
                Err(e) => {
                    held.close().await;
                    Err(e.into())
                }
            },
            Err(e) => Err(e.into()),
        };
        let pid = match released {
            Ok(pid) => pid,
            Err(e) => {
                previous.put_back();
                old.resume();
                return Err(e);
            }
        };
        for (old_pid, outcome) in old.end(self.timings.kill_grace).await {
            self.note(format!(
                "Conductor PID {old_pid}: {outcome:?} once S{generation} ran"
            ))
            .await;
        }
        Ok(pid)
    }
}

/// Runs one recovery cycle to its end.
pub async fn recover(env: &RecoveryEnv, req: RecoveryRequest) -> Recovered {
    if req.kind == RecoveryKind::ContextRecovery && lethe_preflight(env) {
        if let Some(done) = lethe(env, &req).await {
            return done;
        }
        env.note("Lethe failed twice before relaunching; falling back to claude_export".into())
            .await;
    }
    claude_export(env, &req).await
}

/// Lethe is a soft dependency: usable when its program is installed (found on PATH and
/// executable). A Lethe that then fails is retried once and falls back to `claude_export`.
fn lethe_preflight(env: &RecoveryEnv) -> bool {
    use std::os::unix::fs::PermissionsExt;
    env.launcher
        .templates
        .lethe
        .first()
        .and_then(|p| find_program(p))
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// What Lethe's last stdout line (a JSON object) reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct LetheResult {
    pub status: String,
    #[serde(default)]
    pub relaunch_started: bool,
    pub pid: Option<i32>,
    pub session_id: Option<String>,
}

/// Parses the completion contract: the last non-empty stdout line that is a JSON object.
pub fn parse_lethe_output(stdout: &str) -> Option<LetheResult> {
    stdout
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .find_map(|l| serde_json::from_str::<LetheResult>(l.trim()).ok())
}

/// Up to two attempts; `None` when both failed before any relaunch started.
async fn lethe(env: &RecoveryEnv, req: &RecoveryRequest) -> Option<Recovered> {
    let generation = req.generation;
    for attempt in 1..=2 {
        env.report(Provider::Lethe, RecoveryStatus::Started, generation, None)
            .await;
        match run_lethe(env, req).await {
            Some((exit_ok, r)) if r.relaunch_started || (exit_ok && r.status == "success") => {
                // A Conductor generation started: no second provider in this cycle.
                return Some(lethe_relaunched(env, req, r).await);
            }
            _ => {
                env.report(Provider::Lethe, RecoveryStatus::Failed, generation, None)
                    .await;
                env.note(format!("Lethe attempt {attempt} failed before relaunch"))
                    .await;
            }
        }
    }
    None
}

/// One run of `lethe compact` for the Conductor's session, bounded in time: whether it
/// exited well, and the contract it printed (none: no contract, or it did not end).
async fn run_lethe(env: &RecoveryEnv, req: &RecoveryRequest) -> Option<(bool, LetheResult)> {
    let mut argv = env.launcher.templates.lethe.clone();
    argv.extend(
        [
            "compact",
            "--session",
            &req.session_id,
            "--project",
            &env.launcher.project.display().to_string(),
            "--title",
            &conductor_title(req.generation),
            "--permission-mode",
            req.resolved.permission.as_str(),
            "--prompt",
            &req.resolved.prompt,
        ]
        .map(str::to_owned),
    );
    let run = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&env.launcher.project)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(LETHE_TIMEOUT, run).await {
        Ok(Ok(out)) => parse_lethe_output(&String::from_utf8_lossy(&out.stdout))
            .map(|r| (out.status.success(), r)),
        _ => None,
    }
}

/// Lethe started a new Conductor: its process found (the PID it said, if alive, else
/// the claude resuming its session) and recorded, the outcome reported.
async fn lethe_relaunched(env: &RecoveryEnv, req: &RecoveryRequest, r: LetheResult) -> Recovered {
    let new_session = r
        .session_id
        .filter(|s| valid_session_id(s) && *s != req.session_id);
    let session = new_session
        .clone()
        .unwrap_or_else(|| req.session_id.clone());
    let conductor = r
        .pid
        .filter(|p| procs::is_alive(*p))
        .or_else(|| procs::find_resumed_claude(&session))
        .map(ProcessId::observe);
    if let Some(p) = conductor {
        let _ = write_pid_file(&env.temp, CONDUCTOR_PID_FILE, p.pid);
    }
    let status = if r.status == "success" {
        RecoveryStatus::Success
    } else {
        RecoveryStatus::Failed
    };
    env.report(
        Provider::Lethe,
        status,
        req.generation,
        conductor.map(|p| p.pid),
    )
    .await;
    Recovered {
        outcome: RecoveryOutcome {
            provider: Provider::Lethe,
            relaunched: true,
            pid_known: conductor.is_some(),
            session_rediscover: false,
            new_session_id: new_session,
            failure: None,
            artifact: None,
        },
        conductor,
    }
}

/// Export, trim, size gate, relaunch, and only then the old Conductor ended; escalates
/// to `standard_compact` when no export comes back or the trimmed export is still too
/// large (docs/orchestration.md §4): a fresh Conductor never starts without its history.
async fn claude_export(env: &RecoveryEnv, req: &RecoveryRequest) -> Recovered {
    let generation = req.generation;
    env.report(
        Provider::ClaudeExport,
        RecoveryStatus::Started,
        generation,
        None,
    )
    .await;
    let saved = match export_for_relaunch(env, req).await {
        Ok(path) => path,
        Err(why) => {
            env.note(format!("{why}; escalating to standard_compact"))
                .await;
            return standard_compact(env, req).await;
        }
    };
    let args = vec![
        "--permission-mode".to_owned(),
        req.resolved.permission.as_str().to_owned(),
        payload::bootstrap_prompt(
            &req.resolved.prompt,
            req.kind,
            Some(&saved),
            &req.session_id,
        ),
    ];
    let artifact = Some(saved.display().to_string());
    let old = Paused::pause(&req.conductor.into_iter().collect::<Vec<_>>());
    match env.launch_conductor(generation, &args, old).await {
        Ok(pid) => {
            env.report(
                Provider::ClaudeExport,
                RecoveryStatus::Success,
                generation,
                Some(pid.pid),
            )
            .await;
            Recovered {
                outcome: RecoveryOutcome {
                    provider: Provider::ClaudeExport,
                    relaunched: true,
                    pid_known: true,
                    // A fresh session: its id is learned from task-00 later.
                    session_rediscover: true,
                    new_session_id: None,
                    failure: None,
                    artifact,
                },
                conductor: Some(pid),
            }
        }
        Err(e) => {
            env.report(
                Provider::ClaudeExport,
                RecoveryStatus::Failed,
                generation,
                None,
            )
            .await;
            // Said with its cause: a bare "failed" leaves the operator to guess.
            env.note(format!("Conductor S{generation} did not start: {e}"))
                .await;
            let mut done = failed(Provider::ClaudeExport, e.to_string());
            done.outcome.artifact = artifact;
            done
        }
    }
}

/// The Conductor's session exported, trimmed and saved for the new one (its file), or
/// why there is none to relaunch with (no export, or too large even trimmed).
async fn export_for_relaunch(
    env: &RecoveryEnv,
    req: &RecoveryRequest,
) -> Result<PathBuf, RecoveryError> {
    let text = run_export(env, &req.session_id)
        .await
        .map_err(|e| RecoveryError::Export(Box::new(e)))?;
    let trimmed = export::trim(&text);
    let tokens = export::estimate_tokens(&trimmed);
    if tokens > env.force_compact {
        return Err(RecoveryError::TooLarge {
            tokens,
            limit: env.force_compact,
        });
    }
    save_trimmed(env, &req.session_id, req.generation, &trimmed)
}

/// Runs `claude_export <session>`; the export is the newest matching file it wrote to
/// the export folder, else its standard output.
async fn run_export(env: &RecoveryEnv, session: &str) -> Result<String, RecoveryError> {
    let argv = &env.launcher.templates.claude_export;
    let started = SystemTime::now();
    let run = Command::new(&argv[0])
        .args(&argv[1..])
        .arg(session)
        .current_dir(&env.launcher.project)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let program = || argv[0].clone();
    let out = tokio::time::timeout(EXPORT_TIMEOUT, run)
        .await
        .map_err(|_| RecoveryError::ExportTimeout {
            program: program(),
            after: EXPORT_TIMEOUT,
        })?
        .map_err(|source| RecoveryError::ExportStart {
            program: program(),
            source,
        })?;
    if !out.status.success() {
        return Err(RecoveryError::ExportFailed {
            program: program(),
            status: out.status,
        });
    }
    if let Some(file) = export::newest_export(&env.timings.export_dir, session, started) {
        return std::fs::read(&file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|e| OwnFileError::doing("read", &file)(e).into());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if text.trim().is_empty() {
        return Err(RecoveryError::NoExport { program: program() });
    }
    Ok(text)
}

fn save_trimmed(
    env: &RecoveryEnv,
    session: &str,
    generation: u32,
    text: &str,
) -> Result<PathBuf, RecoveryError> {
    crate::core::safe_fs::create_dirs(&env.trimmed_dir, 0o700)
        .map_err(OwnFileError::doing("create", &env.trimmed_dir))?;
    let path = env.trimmed_dir.join(format!("{session}-S{generation}.md"));
    std::fs::write(&path, text).map_err(OwnFileError::doing("write", &path))?;
    Ok(path)
}

/// `/compact` on the session itself, then a resumed relaunch. Two failed attempts fail
/// the recovery closed.
async fn standard_compact(env: &RecoveryEnv, req: &RecoveryRequest) -> Recovered {
    let generation = req.generation;
    let mut last_error = String::new();
    for attempt in 1..=2 {
        env.report(
            Provider::StandardCompact,
            RecoveryStatus::Started,
            generation,
            None,
        )
        .await;
        env.note(format!("standard_compact attempt {attempt}"))
            .await;
        // The old Conductor must not act on its session while another process compacts
        // it: paused, and run on as it was if the attempt fails.
        let old = Paused::pause(&req.conductor.into_iter().collect::<Vec<_>>());
        if let Err(e) = compact_once(env, req).await {
            old.resume();
            last_error = e.to_string();
            continue;
        }
        let args = vec![
            "--resume".into(),
            req.session_id.clone(),
            "--permission-mode".into(),
            req.resolved.permission.as_str().to_owned(),
            payload::bootstrap_prompt(&req.resolved.prompt, req.kind, None, &req.session_id),
        ];
        match env.launch_conductor(generation, &args, old).await {
            Ok(pid) => {
                env.report(
                    Provider::StandardCompact,
                    RecoveryStatus::Success,
                    generation,
                    Some(pid.pid),
                )
                .await;
                return Recovered {
                    outcome: RecoveryOutcome {
                        provider: Provider::StandardCompact,
                        relaunched: true,
                        pid_known: true,
                        session_rediscover: false,
                        new_session_id: None,
                        failure: None,
                        artifact: None,
                    },
                    conductor: Some(pid),
                };
            }
            Err(e) => last_error = e.to_string(),
        }
    }
    env.report(
        Provider::StandardCompact,
        RecoveryStatus::Failed,
        generation,
        None,
    )
    .await;
    failed(
        Provider::StandardCompact,
        format!("standard_compact failed twice: {last_error}"),
    )
}

/// One `/compact` of the Conductor's session in a window of its own: the transcript
/// followed from its end *before* the window starts (the boundary cannot be missed),
/// the window ended once the boundary is seen or the time is up.
async fn compact_once(env: &RecoveryEnv, req: &RecoveryRequest) -> Result<(), RecoveryError> {
    let transcript = find_transcript(&env.timings.claude_projects_dir, &req.session_id)
        .ok_or_else(|| RecoveryError::NoTranscript {
            dir: env.timings.claude_projects_dir.clone(),
            session: req.session_id.clone(),
        })?;
    let lines = count_lines(&transcript).map_err(OwnFileError::doing("read", &transcript))?;
    let watch = BoundaryWatch::start(transcript.clone(), lines)?;
    let argv = env.launcher.claude_window(
        &format!("Compact: {}", conductor_title(req.generation)),
        &[
            "--resume".into(),
            req.session_id.clone(),
            "--permission-mode".into(),
            req.resolved.permission.as_str().to_owned(),
            "/compact".into(),
        ],
    );
    let window = env.launcher.spawn(&argv)?;
    let compacted = watch.wait(env.timings.compact_timeout).await;
    procs::guarded_kill(window, env.timings.kill_grace).await;
    if compacted {
        Ok(())
    } else {
        Err(RecoveryError::NotCompacted {
            after: env.timings.compact_timeout,
        })
    }
}

/// Why a step of a recovery failed; the recovery's report says it in these words.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    File(#[from] OwnFileError),
    #[error("claude_export failed: {0}")]
    Export(#[source] Box<RecoveryError>),
    #[error("{program} did not finish within {after:?}")]
    ExportTimeout { program: String, after: Duration },
    #[error("cannot run {program}: {source}")]
    ExportStart {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} exited with {status}")]
    ExportFailed {
        program: String,
        status: std::process::ExitStatus,
    },
    #[error("{program} produced no export")]
    NoExport { program: String },
    #[error("export is still ~{tokens} tokens (> FORCE_COMPACT {limit})")]
    TooLarge { tokens: u64, limit: u64 },
    #[error("no transcript {}/*/{session}*.jsonl", .dir.display())]
    NoTranscript { dir: PathBuf, session: String },
    #[error("no compact_boundary within {after:?}")]
    NotCompacted { after: Duration },
}

/// The window title of a Conductor generation: `Conductor (S2)`.
pub fn conductor_title(generation: u32) -> String {
    format!("Conductor (S{generation})")
}

fn failed(provider: Provider, why: String) -> Recovered {
    Recovered {
        outcome: RecoveryOutcome {
            provider,
            relaunched: false,
            pid_known: false,
            session_rediscover: false,
            new_session_id: None,
            failure: Some(why),
            artifact: None,
        },
        conductor: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lethe_contract_is_the_last_json_line() {
        let out = "compacting…\n{\"status\":\"progress\"}\n{\"status\":\"success\",\"relaunch_started\":true,\"pid\":42,\"session_id\":\"s2\"}\n\n";
        let r = parse_lethe_output(out).unwrap();
        assert_eq!(
            (r.status.as_str(), r.relaunch_started, r.pid),
            ("success", true, Some(42))
        );
        assert_eq!(
            parse_lethe_output("no contract here").map(|r| r.status),
            None
        );
        let r = parse_lethe_output("{\"status\":\"failed\"}").unwrap();
        assert!(!r.relaunch_started);
    }
}
