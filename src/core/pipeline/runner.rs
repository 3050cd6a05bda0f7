//! Running one pipeline: iterations of its steps, with variables, loop control, safety
//! limits, and commands (pause, resume, stop, new steps) that take effect between steps
//! (stop: at once) and between iterations (new steps). Every transition is reported.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::time::Duration;

use crate::core::children::GroupChild;
use crate::core::event::{CoreEvent, PipelineReport, StepTrace};
use crate::core::pipeline::expr;
use crate::core::pipeline::interpolate::{command_args, interpolate, interpolate_value};
use crate::core::pipeline::output::{
    ProcessSlots, captured_text, forward_lines, line_queue, read_tail, take_slots,
};
use crate::core::pipeline::spec::{Definition, Loop, OnError, Step, StepKind, Until};
use crate::settings::PipelineLimits;

/// Commands to a running pipeline.
#[derive(Debug)]
pub enum RunCmd {
    Pause,
    Resume,
    Stop,
    /// New steps (and loop, limits) for the next iteration.
    Replace(Box<Definition>),
}

/// What every run shares: where commands run, the LLM argv, where reports and emitted
/// events go.
#[derive(Clone)]
pub struct RunnerEnv {
    pub project: PathBuf,
    pub llm: Option<Vec<String>>,
    pub events: mpsc::Sender<CoreEvent>,
    pub bus: broadcast::Sender<(String, Value)>,
    pub limits: PipelineLimits,
    /// Step processes of every pipeline of this host.
    pub all_slots: Arc<ProcessSlots>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Completed,
    Stopped,
    Failed(String),
}

struct Execution {
    lines: mpsc::Receiver<Option<String>>,
    exit: tokio::sync::oneshot::Receiver<Option<i32>>,
    /// Set once the process has been waited for (`exit_code` is `None` after a signal).
    finished: bool,
    exit_code: Option<i32>,
    /// The task that owns the process group and forwards its output; it ends the group
    /// when the run ends.
    owner: tokio::task::JoinHandle<()>,
}

/// How long a step's process group gets after SIGTERM before SIGKILL.
pub const STEP_KILL_GRACE: Duration = Duration::from_secs(2);

struct Run<'a> {
    env: &'a RunnerEnv,
    name: String,
    vars: HashMap<String, Value>,
    executions: HashMap<String, Execution>,
    next_execution: u64,
    cmds: &'a mut mpsc::Receiver<RunCmd>,
    pending: Option<Box<Definition>>,
    paused: bool,
    /// Cancelled by a stop (or maestro's exit): the running step's processes end now.
    stop: CancellationToken,
    /// Cancelled when the run ends, however it ends: background executions end with it.
    end: CancellationToken,
    /// What the last step printed (or its error), for the run history.
    last_excerpt: String,
    /// This run's step processes (background ones count until they end).
    slots: Arc<ProcessSlots>,
}

/// Characters of a step's output the history keeps.
const EXCERPT: usize = 400;

/// The last `EXCERPT` characters of `text`, on a character boundary.
fn tail(text: &str) -> String {
    let skip = text.chars().count().saturating_sub(EXCERPT);
    text.chars().skip(skip).collect()
}

fn step_type(kind: &StepKind) -> &'static str {
    match kind {
        StepKind::Command { .. } => "command",
        StepKind::Watch { .. } => "watch",
        StepKind::Llm { .. } => "llm",
        StepKind::Condition { .. } => "condition",
        StepKind::Sentinel { .. } => "sentinel",
        StepKind::Emit { .. } => "emit",
    }
}

enum Flow {
    Go,
    Stop,
}

/// Runs `def` to its end; returns how it ended and its final variables. `stop` ends
/// the step that runs (its whole process group) at once; `event` is the happening that
/// started the run, available as `$event`.
pub async fn run(
    def: Definition,
    env: &RunnerEnv,
    cmds: &mut mpsc::Receiver<RunCmd>,
    stop: CancellationToken,
    event: Option<Value>,
) -> (Ended, HashMap<String, Value>) {
    let mut vars = HashMap::new();
    if let Some(e) = event {
        vars.insert("event".to_owned(), e);
    }
    let mut r = Run {
        env,
        name: def.name.clone(),
        vars,
        executions: HashMap::new(),
        next_execution: 0,
        cmds,
        pending: None,
        paused: false,
        end: stop.child_token(),
        stop,
        last_excerpt: String::new(),
        slots: ProcessSlots::new(env.limits.max_processes_per_run, "in this run"),
    };
    r.report("started", 0, None, None).await;
    let deadline = def.timeout.map(|t| Instant::now() + t);
    let ended = match deadline {
        Some(d) => match tokio::time::timeout_at(d, r.iterations(def)).await {
            Ok(e) => e,
            Err(_) => Ended::Failed("timeout".into()),
        },
        None => r.iterations(def).await,
    };
    // Background executions end with the run; each owner ends its process group.
    r.end.cancel();
    for (_, exec) in r.executions.drain() {
        let _ = tokio::time::timeout(STEP_KILL_GRACE * 2, exec.owner).await;
    }
    let ended = if r.stop.is_cancelled() && !matches!(ended, Ended::Failed(_)) {
        Ended::Stopped
    } else {
        ended
    };
    let (status, outcome) = match &ended {
        Ended::Completed => ("completed", None),
        Ended::Stopped => ("stopped", None),
        Ended::Failed(why) => ("failed", Some(why.clone())),
    };
    r.report(status, 0, None, outcome).await;
    (ended, r.vars)
}

impl Run<'_> {
    async fn report(
        &self,
        status: &'static str,
        iteration: u64,
        step: Option<usize>,
        outcome: Option<String>,
    ) {
        let _ = self
            .env
            .events
            .send(CoreEvent::Pipeline(PipelineReport {
                name: self.name.clone(),
                status,
                iteration,
                step,
                outcome,
                trace: None,
            }))
            .await;
    }

    /// Applies queued commands; while paused, waits for resume or stop.
    async fn control(&mut self, iteration: u64) -> Flow {
        loop {
            let cmd = if self.paused {
                match self.cmds.recv().await {
                    Some(c) => c,
                    None => return Flow::Stop,
                }
            } else {
                match self.cmds.try_recv() {
                    Ok(c) => c,
                    Err(_) => return Flow::Go,
                }
            };
            if let Flow::Stop = self.apply(cmd, iteration).await {
                return Flow::Stop;
            }
        }
    }

    /// One command, reported as it takes effect.
    async fn apply(&mut self, cmd: RunCmd, iteration: u64) -> Flow {
        match cmd {
            RunCmd::Stop => return Flow::Stop,
            RunCmd::Pause if !self.paused => {
                self.paused = true;
                self.report("paused", iteration, None, None).await;
            }
            RunCmd::Resume if self.paused => {
                self.paused = false;
                self.report("resumed", iteration, None, None).await;
            }
            RunCmd::Replace(def) => {
                self.pending = Some(def);
                self.report("edited", iteration, None, None).await;
            }
            RunCmd::Pause | RunCmd::Resume => {}
        }
        Flow::Go
    }

    async fn iterations(&mut self, mut def: Definition) -> Ended {
        let mut iteration = 0u64;
        loop {
            if let Flow::Stop = self.control(iteration).await {
                return Ended::Stopped;
            }
            if let Some(new) = self.pending.take() {
                def = *new;
            }
            if def.max_iterations.is_some_and(|m| iteration >= m) {
                return Ended::Completed;
            }
            if let Loop::While(check) = &def.looping {
                match expr::eval_bool(check, &self.vars) {
                    Ok(true) => {}
                    Ok(false) => return Ended::Completed,
                    Err(e) => return Ended::Failed(format!("loop.check: {e}")),
                }
            }
            iteration += 1;
            self.report("iteration", iteration, None, None).await;
            for (i, step) in def.steps.iter().enumerate() {
                if let Flow::Stop = self.control(iteration).await {
                    return Ended::Stopped;
                }
                match self.step_or_stop(step, iteration, i).await {
                    None => return Ended::Stopped,
                    Some(Err(e)) => return Ended::Failed(format!("step {i}: {e}")),
                    Some(Ok(())) => {}
                }
            }
            match &def.looping {
                Loop::Once => return Ended::Completed,
                Loop::Count(n) if iteration >= *n => return Ended::Completed,
                Loop::Until(check) => match expr::eval_bool(check, &self.vars) {
                    Ok(true) => return Ended::Completed,
                    Ok(false) => {}
                    Err(e) => return Ended::Failed(format!("loop.check: {e}")),
                },
                Loop::Continuous(pause)
                    if !pause.is_zero()
                        && self
                            .wait(tokio::time::sleep(*pause), iteration)
                            .await
                            .is_none() =>
                {
                    return Ended::Stopped;
                }
                Loop::Event(name) => {
                    let mut bus = self.env.bus.subscribe();
                    let name = name.clone();
                    let next = async move {
                        loop {
                            match bus.recv().await {
                                Ok((event, payload)) if event == name => return payload,
                                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                                Err(broadcast::error::RecvError::Closed) => {
                                    std::future::pending::<()>().await;
                                }
                            }
                        }
                    };
                    match self.wait(next, iteration).await {
                        // The next iteration sees the event that started it as `$event`.
                        Some(payload) => {
                            self.vars.insert("event".to_owned(), payload);
                        }
                        None => return Ended::Stopped,
                    }
                }
                _ => {}
            }
        }
    }

    /// Waits for `fut` between iterations while still taking commands; `None` if
    /// stopped meanwhile.
    async fn wait<T>(
        &mut self,
        fut: impl std::future::Future<Output = T>,
        iteration: u64,
    ) -> Option<T> {
        tokio::pin!(fut);
        loop {
            tokio::select! {
                out = &mut fut => return Some(out),
                () = self.stop.cancelled() => return None,
                cmd = self.cmds.recv() => match cmd {
                    None => return None,
                    Some(cmd) => {
                        if let Flow::Stop = self.apply(cmd, iteration).await {
                            return None;
                        }
                    }
                },
            }
        }
    }

    /// Runs one top-level step; `None` when a stop arrived meanwhile.
    async fn step_or_stop(
        &mut self,
        step: &Step,
        iteration: u64,
        index: usize,
    ) -> Option<Result<(), String>> {
        let started = Instant::now();
        self.last_excerpt.clear();
        let outcome = self.step(step).await;
        let mut excerpt = std::mem::take(&mut self.last_excerpt);
        if let Err(e) = &outcome {
            excerpt = tail(e);
        }
        let trace = StepTrace {
            step_type: step_type(&step.kind),
            duration_ms: started.elapsed().as_millis() as u64,
            excerpt,
        };
        let (result, text) = match outcome {
            Ok(text) => (Ok(()), text),
            Err(e) if step.on_error == OnError::Skip => {
                if let Some(name) = &step.output_to {
                    self.vars.insert(name.clone(), json!({"error": e}));
                }
                (Ok(()), format!("skipped: {e}"))
            }
            Err(e) => (Err(e.clone()), format!("error: {e}")),
        };
        let _ = self
            .env
            .events
            .send(CoreEvent::Pipeline(PipelineReport {
                name: self.name.clone(),
                status: "step",
                iteration,
                step: Some(index),
                outcome: Some(text),
                trace: Some(trace),
            }))
            .await;
        // A stop that arrived during the step ends the run before the next one; any
        // other command that arrived meanwhile is applied, not lost.
        if self.stop.is_cancelled() {
            return None;
        }
        while let Ok(cmd) = self.cmds.try_recv() {
            if let Flow::Stop = self.apply(cmd, iteration).await {
                return None;
            }
        }
        Some(result)
    }

    /// One step (with its retries). Returns a short outcome for the report.
    fn step<'s>(
        &'s mut self,
        step: &'s Step,
    ) -> Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 's>> {
        Box::pin(async move {
            let attempts = if step.on_error == OnError::Retry {
                3
            } else {
                1
            };
            let mut last = String::new();
            for _ in 0..attempts {
                match self.execute(&step.kind).await {
                    Ok((value, outcome)) => {
                        if let (Some(name), Some(value)) = (&step.output_to, value) {
                            self.vars.insert(name.clone(), value);
                        }
                        return Ok(outcome);
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        })
    }

    async fn execute(&mut self, kind: &StepKind) -> Result<(Option<Value>, String), String> {
        match kind {
            StepKind::Command {
                program,
                args,
                cwd,
                env,
                timeout,
                wait,
            } => {
                let args = command_args(program, args, &self.vars)?;
                let dir = match cwd {
                    Some(c) => inside_project(&self.env.project, &interpolate(c, &self.vars)?)?,
                    None => self.env.project.clone(),
                };
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(&args).current_dir(&dir).stdin(Stdio::null());
                for (k, v) in env {
                    cmd.env(k, interpolate(v, &self.vars)?);
                }
                if *wait {
                    let started = Instant::now();
                    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                    let _slots = take_slots(&self.slots, &self.env.all_slots)?;
                    let mut child = GroupChild::spawn(&mut cmd)
                        .map_err(|e| format!("cannot run {program}: {e}"))?;
                    let output = collect_output(&mut child, self.env.limits.output_bytes);
                    let limit = async {
                        match timeout {
                            Some(t) => tokio::time::sleep(*t).await,
                            None => std::future::pending().await,
                        }
                    };
                    let status = tokio::select! {
                        status = child.wait() => status.map_err(|e| format!("cannot run {program}: {e}"))?,
                        () = limit => {
                            child.terminate(STEP_KILL_GRACE).await;
                            return Err(format!(
                                "{program} timed out after {:?}; its processes were ended",
                                timeout.unwrap_or_default()
                            ));
                        }
                        () = self.stop.cancelled() => {
                            child.terminate(STEP_KILL_GRACE).await;
                            return Err("stopped; the step's processes were ended".into());
                        }
                    };
                    // What the command left running in its group does not outlive it.
                    child.end_leftovers(STEP_KILL_GRACE).await;
                    let (stdout, stderr) = output.await.unwrap_or_default();
                    let stdout = captured_text(&stdout.0, stdout.1);
                    let stderr = captured_text(&stderr.0, stderr.1);
                    self.last_excerpt = tail(&format!("{stdout}{stderr}"));
                    let code = status.code();
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
                } else {
                    let id = self.start_execution(cmd, program)?;
                    Ok((Some(json!({"executionId": id})), format!("started {id}")))
                }
            }
            StepKind::Watch {
                execution_id,
                rules,
                until,
            } => {
                let id = interpolate(execution_id, &self.vars)?;
                let exec = self
                    .executions
                    .get_mut(&id)
                    .ok_or_else(|| format!("no running execution {id:?}"))?;
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
                if !exec.finished && *until == Until::Finished {
                    exec.exit_code = (&mut exec.exit).await.ok().flatten();
                    exec.finished = true;
                }
                let code = exec.exit_code;
                Ok((
                    Some(json!({"exitCode": code, "lines": lines})),
                    format!("{} lines", lines.len()),
                ))
            }
            StepKind::Llm { prompt, .. } => {
                let argv = self.env.llm.clone().ok_or(
                    "llm steps need `[pipelines] llm` in the configuration (for example [\"claude\", \"-p\"])",
                )?;
                let prompt = interpolate(prompt, &self.vars)?;
                let mut cmd = tokio::process::Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .current_dir(&self.env.project)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                let _slots = take_slots(&self.slots, &self.env.all_slots)?;
                let mut child = GroupChild::spawn(&mut cmd)
                    .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
                if let Some(mut stdin) = child.child_mut().stdin.take() {
                    stdin
                        .write_all(prompt.as_bytes())
                        .await
                        .map_err(|e| e.to_string())?;
                }
                let output = collect_output(&mut child, self.env.limits.output_bytes);
                let status = tokio::select! {
                    status = child.wait() => status.map_err(|e| e.to_string())?,
                    () = self.stop.cancelled() => {
                        child.terminate(STEP_KILL_GRACE).await;
                        return Err("stopped; the provider's processes were ended".into());
                    }
                };
                child.end_leftovers(STEP_KILL_GRACE).await;
                let ((stdout, cut), _) = output.await.unwrap_or_default();
                if !status.success() {
                    return Err(format!("{} exited with {status}", argv[0]));
                }
                let text = captured_text(&stdout, cut);
                self.last_excerpt = tail(&text);
                let n = text.len();
                Ok((Some(Value::String(text)), format!("{n} bytes")))
            }
            StepKind::Condition {
                check,
                then,
                otherwise,
            } => {
                let yes = expr::eval_bool(check, &self.vars)?;
                for s in if yes { then } else { otherwise } {
                    match self.step(s).await {
                        Ok(_) => {}
                        Err(e) if s.on_error == OnError::Skip => {
                            if let Some(name) = &s.output_to {
                                self.vars.insert(name.clone(), json!({"error": e}));
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok((None, if yes { "then".into() } else { "else".into() }))
            }
            StepKind::Sentinel { definition, wait } => {
                let child = (**definition).clone();
                let env = self.env.clone();
                let stop = self.stop.child_token();
                let event = self.vars.get("event").cloned();
                if *wait {
                    let (_tx, mut rx) = mpsc::channel(1);
                    let (ended, vars) = Box::pin(run(child, &env, &mut rx, stop, event)).await;
                    let value = Value::Object(vars.into_iter().collect());
                    match ended {
                        Ended::Failed(why) => Err(format!("nested pipeline failed: {why}")),
                        _ => Ok((Some(value), "nested pipeline completed".into())),
                    }
                } else {
                    tokio::spawn(async move {
                        let (_tx, mut rx) = mpsc::channel(1);
                        let _ = Box::pin(run(child, &env, &mut rx, stop, event)).await;
                    });
                    Ok((
                        Some(json!({"started": true})),
                        "nested pipeline started".into(),
                    ))
                }
            }
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

    fn start_execution(
        &mut self,
        mut cmd: tokio::process::Command,
        program: &str,
    ) -> Result<String, String> {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let slots = take_slots(&self.slots, &self.env.all_slots)?;
        let mut child =
            GroupChild::spawn(&mut cmd).map_err(|e| format!("cannot run {program}: {e}"))?;
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
fn inside_project(project: &std::path::Path, dir: &str) -> Result<PathBuf, String> {
    let refused = || format!("params.cwd {dir:?} is not a folder inside the project");
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
