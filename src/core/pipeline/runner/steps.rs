//! Running one step: a command (waited for or left running), a watch on a running
//! command's output, an LLM prompt, a condition, a child pipeline, an emitted event.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::StepError;
use super::{Ended, Execution, Run, STEP_KILL_GRACE, run, tail};
use crate::core::children::GroupChild;
use crate::core::pipeline::expr;
use crate::core::pipeline::interpolate::{command_args, interpolate, interpolate_value};
use crate::core::pipeline::output::{
    captured_text, forward_lines, line_queue, read_tail, take_slots,
};
use crate::core::pipeline::spec::{Definition, OnError, Step, StepKind, Until};

/// The event that started the run, for a script to read as data: `MAESTRO_EVENT` (the
/// whole event as JSON) and `MAESTRO_EVENT_<FIELD>` for each field (`MAESTRO_EVENT_DETAIL`,
/// `MAESTRO_EVENT_TASK_ID`; strings as they are, other values as JSON). A value holding
/// a NUL byte cannot be an environment value and is left out.
pub(super) fn event_environment(event: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(fields)) = event else {
        return Vec::new();
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    std::iter::once((
        "MAESTRO_EVENT".to_owned(),
        Value::Object(fields.clone()).to_string(),
    ))
    .chain(fields.iter().map(|(k, v)| {
        (
            format!(
                "MAESTRO_EVENT_{}",
                crate::core::pipeline::program_text::env_name(k)
            ),
            text(v),
        )
    }))
    .filter(|(_, v)| !v.contains('\0'))
    .collect()
}

/// A nested pipeline's run: no one edits its steps or pauses it (no commands, a flag
/// of its own); it ends with `stop`.
async fn run_alone(
    def: Definition,
    env: &super::RunnerEnv,
    stop: tokio_util::sync::CancellationToken,
    event: Option<Value>,
) -> (Ended, std::collections::HashMap<String, Value>) {
    let (_commands, mut rx) = mpsc::channel(1);
    Box::pin(run(
        def,
        env,
        (&mut rx, std::sync::Arc::default()),
        stop,
        event,
    ))
    .await
}

impl Run<'_> {
    pub(super) async fn execute(
        &mut self,
        kind: &StepKind,
    ) -> Result<(Option<Value>, String), StepError> {
        match kind {
            StepKind::Command {
                program,
                args,
                cwd,
                env,
                timeout,
                wait,
            } => {
                let cmd = self.command(program, args, cwd.as_deref(), env)?;
                if *wait {
                    self.run_waited(cmd, program, *timeout).await
                } else {
                    let id = self.start_execution(cmd, program)?;
                    Ok((Some(json!({"executionId": id})), format!("started {id}")))
                }
            }
            StepKind::Watch {
                execution_id,
                rules,
                until,
            } => self.watch(execution_id, rules, *until).await,
            StepKind::Llm { prompt, .. } => self.llm(prompt).await,
            StepKind::Condition {
                check,
                then,
                otherwise,
            } => {
                let yes = expr::eval_bool(check, &self.vars)?;
                self.branch(if yes { then } else { otherwise }).await?;
                Ok((None, if yes { "then".into() } else { "else".into() }))
            }
            StepKind::Sentinel { definition, wait } => self.nested(definition, *wait).await,
            StepKind::Emit { event, data } => {
                let payload = match data {
                    Some(d) => interpolate_value(d, &self.vars)?,
                    None => Value::Null,
                };
                let _ = self.env.bus.send((event.clone(), payload));
                Ok((None, format!("emitted {event}")))
            }
        }
    }

    /// A `command` step's process, not started: its arguments and folder (inside the
    /// project) filled in from the run's values, the event in its environment.
    fn command(
        &self,
        program: &str,
        args: &[String],
        cwd: Option<&str>,
        env: &[(String, String)],
    ) -> Result<tokio::process::Command, StepError> {
        let args = command_args(program, args, &self.vars)?;
        let dir = match cwd {
            Some(c) => inside_project(&self.env.project, &interpolate(c, &self.vars)?)?,
            None => self.env.project.clone(),
        };
        let mut cmd = match self.memory_mb {
            // Held to the budget by maestro itself, which sets the limit and then
            // becomes the program (`maestro run-within`).
            Some(mb) => {
                let maestro = std::env::current_exe().map_err(|source| StepError::Start {
                    program: program.to_owned(),
                    source,
                })?;
                let mut c = tokio::process::Command::new(maestro);
                c.args([
                    "run-within",
                    "--memory-bytes",
                    &(mb << 20).to_string(),
                    "--",
                ])
                .arg(program);
                c
            }
            None => tokio::process::Command::new(program),
        };
        cmd.args(&args).current_dir(&dir).stdin(Stdio::null());
        for (k, v) in event_environment(self.vars.get("event")) {
            cmd.env(k, v);
        }
        for (k, v) in env {
            cmd.env(k, interpolate(v, &self.vars)?);
        }
        Ok(cmd)
    }

    /// The steps of a condition's branch, in order; a step that may be skipped leaves
    /// its error in its output.
    async fn branch(&mut self, steps: &[Step]) -> Result<(), StepError> {
        for s in steps {
            match self.step(s).await {
                Ok(_) => {}
                Err(e) if s.on_error == OnError::Skip => {
                    if let Some(name) = &s.output_to {
                        self.vars
                            .insert(name.clone(), json!({"error": e.to_string()}));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A nested pipeline: waited for (its values are the step's output) or started
    /// beside this one.
    async fn nested(
        &mut self,
        definition: &Definition,
        wait: bool,
    ) -> Result<(Option<Value>, String), StepError> {
        let child = definition.clone();
        let env = self.env.clone();
        let stop = self.stop.child_token();
        let event = self.vars.get("event").cloned();
        if wait {
            let (ended, vars) = run_alone(child, &env, stop, event).await;
            let value = Value::Object(vars.into_iter().collect());
            return match ended {
                Ended::Failed(why) => Err(StepError::Nested { why }),
                _ => Ok((Some(value), "nested pipeline completed".into())),
            };
        }
        tokio::spawn(async move {
            let _ = run_alone(child, &env, stop, event).await;
        });
        Ok((
            Some(json!({"started": true})),
            "nested pipeline started".into(),
        ))
    }

    /// A `command` step waited for: its output kept (bounded), its time limit and a stop
    /// enforced on its whole process group, what it left running ended.
    async fn run_waited(
        &mut self,
        mut cmd: tokio::process::Command,
        program: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<(Option<Value>, String), StepError> {
        let started = Instant::now();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let _slots = take_slots(&self.slots, &self.env.all_slots)?;
        let mut child = GroupChild::spawn(&mut cmd).map_err(|source| StepError::Start {
            program: program.to_owned(),
            source,
        })?;
        let output = collect_output(&mut child, self.env.limits.output_bytes);
        let limit = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            status = child.wait() => status.map_err(|source| StepError::Start {
                program: program.to_owned(),
                source,
            })?,
            () = limit => {
                child.terminate(STEP_KILL_GRACE).await;
                return Err(StepError::TimedOut {
                    program: program.to_owned(),
                    after: timeout.unwrap_or_default(),
                });
            }
            () = self.stop.cancelled() => {
                child.terminate(STEP_KILL_GRACE).await;
                return Err(StepError::Stopped);
            }
        };
        // What the command left running in its group does not outlive it.
        child.end_leftovers(STEP_KILL_GRACE).await;
        let (stdout, stderr) = output.await.unwrap_or_default();
        let stdout = captured_text(&stdout.0, stdout.1);
        let stderr = captured_text(&stderr.0, stderr.1);
        self.last_excerpt = tail(&format!("{stdout}{stderr}"));
        let code = status.code();
        if let Some(mb) = self.memory_mb
            && !status.success()
        {
            return Err(StepError::PastMemoryBudget {
                program: program.to_owned(),
                budget_mb: mb,
                status,
            });
        }
        let value = json!({
            "exitCode": code,
            "lines": stdout.lines().collect::<Vec<_>>(),
            "stdout": stdout,
            "stderr": stderr,
            "durationMs": started.elapsed().as_millis() as u64,
        });
        Ok((
            Some(value),
            format!(
                "exit {}",
                code.map_or_else(|| "signal".into(), |c| c.to_string())
            ),
        ))
    }

    /// A `watch` step: the lines of a started execution, classified by the rules,
    /// until its end, an error line or a match.
    async fn watch(
        &mut self,
        execution_id: &str,
        rules: &[(regex::Regex, String)],
        until: Until,
    ) -> Result<(Option<Value>, String), StepError> {
        let id = interpolate(execution_id, &self.vars)?;
        let exec = self
            .executions
            .get_mut(&id)
            .ok_or_else(|| StepError::NoExecution { id: id.clone() })?;
        let mut lines = Vec::new();
        while let Some(Some(line)) = exec.lines.recv().await {
            let class = rules
                .iter()
                .find(|(re, _)| re.is_match(&line))
                .map(|(_, c)| c.clone());
            let stop = match until {
                Until::Finished => false,
                Until::Error => class.as_deref() == Some("error"),
                Until::Match => class.is_some(),
            };
            lines.push(json!({"text": line, "classification": class}));
            if stop {
                break;
            }
        }
        if !exec.finished && until == Until::Finished {
            exec.exit_code = (&mut exec.exit).await.ok().flatten();
            exec.finished = true;
        }
        let code = exec.exit_code;
        Ok((
            Some(json!({"exitCode": code, "lines": lines})),
            format!("{} lines", lines.len()),
        ))
    }

    /// An `llm` step: the prompt to the configured provider's stdin, its stdout as the
    /// variable.
    async fn llm(&mut self, prompt: &str) -> Result<(Option<Value>, String), StepError> {
        let argv = self.env.llm.clone().ok_or(StepError::NoProvider)?;
        let prompt = interpolate(prompt, &self.vars)?;
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.envs(event_environment(self.vars.get("event")));
        cmd.args(&argv[1..])
            .current_dir(&self.env.project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let _slots = take_slots(&self.slots, &self.env.all_slots)?;
        let mut child = GroupChild::spawn(&mut cmd).map_err(|source| StepError::Start {
            program: argv[0].clone(),
            source,
        })?;
        if let Some(mut stdin) = child.child_mut().stdin.take() {
            stdin
                .write_all(prompt.as_bytes())
                .await
                .map_err(StepError::Provider)?;
        }
        let output = collect_output(&mut child, self.env.limits.output_bytes);
        let status = tokio::select! {
            status = child.wait() => status.map_err(StepError::Provider)?,
            () = self.stop.cancelled() => {
                child.terminate(STEP_KILL_GRACE).await;
                return Err(StepError::ProviderStopped);
            }
        };
        child.end_leftovers(STEP_KILL_GRACE).await;
        let ((stdout, cut), _) = output.await.unwrap_or_default();
        if !status.success() {
            return Err(StepError::ProviderFailed {
                program: argv[0].clone(),
                status,
            });
        }
        let text = captured_text(&stdout, cut);
        self.last_excerpt = tail(&text);
        let n = text.len();
        Ok((Some(Value::String(text)), format!("{n} bytes")))
    }

    fn start_execution(
        &mut self,
        mut cmd: tokio::process::Command,
        program: &str,
    ) -> Result<String, StepError> {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let slots = take_slots(&self.slots, &self.env.all_slots)?;
        let mut child = GroupChild::spawn(&mut cmd).map_err(|source| StepError::Start {
            program: program.to_owned(),
            source,
        })?;
        self.next_execution += 1;
        let id = format!("exec-{}", self.next_execution);
        let (line_tx, lines) = line_queue();
        let (exit_tx, exit) = tokio::sync::oneshot::channel();
        let stdout = child.child_mut().stdout.take();
        let stderr = child.child_mut().stderr.take();
        let end = self.end.clone();
        let owner = tokio::spawn(async move {
            let forward = async {
                tokio::join!(
                    forward_lines(stdout, &line_tx),
                    forward_lines(stderr, &line_tx)
                );
                child.wait().await.ok().and_then(|s| s.code())
            };
            let code = tokio::select! {
                code = forward => {
                    child.end_leftovers(STEP_KILL_GRACE).await;
                    code
                }
                () = end.cancelled() => {
                    child.terminate(STEP_KILL_GRACE).await;
                    None
                }
            };
            // Its slots are free once the group is gone.
            drop(slots);
            let _ = line_tx.try_send(None);
            let _ = exit_tx.send(code);
        });
        self.executions.insert(
            id.clone(),
            Execution {
                lines,
                exit,
                finished: false,
                exit_code: None,
                owner,
            },
        );
        Ok(id)
    }
}

/// A step's working folder: `dir` under the project, which it may not leave (through
/// `..`, an absolute path or a symlink).
fn inside_project(project: &std::path::Path, dir: &str) -> Result<PathBuf, StepError> {
    let refused = || StepError::OutsideProject {
        dir: dir.to_owned(),
    };
    if !crate::core::pipeline::spec::stays_inside(dir) {
        return Err(refused());
    }
    let root = std::fs::canonicalize(project).map_err(|_| refused())?;
    let resolved = std::fs::canonicalize(root.join(dir)).map_err(|_| refused())?;
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(refused())
    }
}

/// The last bytes of a stream and how many were cut before them.
type Tail = (Vec<u8>, u64);

/// Reads a child's stdout and stderr to their ends, concurrently with its run, each
/// kept to its last `max` bytes (with the count of bytes cut).
fn collect_output(child: &mut GroupChild, max: usize) -> tokio::task::JoinHandle<(Tail, Tail)> {
    let stdout = child.child_mut().stdout.take();
    let stderr = child.child_mut().stderr.take();
    tokio::spawn(async move {
        let read_out = async {
            match stdout {
                Some(s) => read_tail(s, max).await,
                None => (Vec::new(), 0),
            }
        };
        let read_err = async {
            match stderr {
                Some(s) => read_tail(s, max).await,
                None => (Vec::new(), 0),
            }
        };
        tokio::join!(read_out, read_err)
    })
}
