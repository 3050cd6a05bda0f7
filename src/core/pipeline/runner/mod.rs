//! Running one pipeline: iterations of its steps, with variables, loop control, safety
//! limits, and commands (pause, resume, stop, new steps) that take effect between steps
//! (stop: at once) and between iterations (new steps). Every transition is reported.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::time::Duration;

use crate::core::event::{CoreEvent, PipelineReport, StepTrace};
use crate::core::pipeline::PipelineLimits;
use crate::core::pipeline::expr;
use crate::core::pipeline::output::ProcessSlots;
use crate::core::pipeline::spec::{Definition, Loop, OnError, Step, StepKind};

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
    /// Shared with the host, which says whether the run is paused (the run pauses
    /// itself at its time limit with `onTimeout: "pause"`).
    paused: Arc<AtomicBool>,
    /// With `safety.onTimeout: "pause"`: when the run pauses itself, and for how long
    /// it runs again after a resume.
    pause_at: Option<(Instant, Duration)>,
    /// Cancelled by a stop (or maestro's exit): the running step's processes end now.
    stop: CancellationToken,
    /// Cancelled when the run ends, however it ends: background executions end with it.
    end: CancellationToken,
    /// What the last step printed (or its error), for the run history.
    last_excerpt: String,
    /// This run's step processes (background ones count until they end).
    slots: Arc<ProcessSlots>,
    /// `safety.maxMemoryMb`: each command step's address space.
    memory_mb: Option<u64>,
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
    (cmds, paused): (&mut mpsc::Receiver<RunCmd>, Arc<AtomicBool>),
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
        paused,
        pause_at: def
            .timeout
            .filter(|_| def.pause_on_timeout)
            .map(|t| (Instant::now() + t, t)),
        end: stop.child_token(),
        stop,
        last_excerpt: String::new(),
        slots: ProcessSlots::new(env.limits.max_processes_per_run, "in this run"),
        memory_mb: def.max_memory_mb,
    };
    r.report("started", 0, None, None).await;
    let deadline = def
        .timeout
        .filter(|_| !def.pause_on_timeout)
        .map(|t| Instant::now() + t);
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
        if let Some((at, _)) = self.pause_at
            && !self.paused.load(Ordering::Relaxed)
            && Instant::now() >= at
        {
            self.paused.store(true, Ordering::Relaxed);
            let why =
                "safety.timeoutMs reached (onTimeout: pause): `sentinel resume` goes on from here";
            self.report("paused", iteration, None, Some(why.into()))
                .await;
        }
        loop {
            let cmd = if self.paused.load(Ordering::Relaxed) {
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
            RunCmd::Pause if !self.paused.load(Ordering::Relaxed) => {
                self.paused.store(true, Ordering::Relaxed);
                self.report("paused", iteration, None, None).await;
            }
            RunCmd::Resume if self.paused.load(Ordering::Relaxed) => {
                self.paused.store(false, Ordering::Relaxed);
                // A run paused at its time limit gets the limit again.
                if let Some((at, limit)) = &mut self.pause_at
                    && Instant::now() >= *at
                {
                    *at = Instant::now() + *limit;
                }
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
                match self
                    .step_or_stop(step, (iteration, i), def.max_step_timeout)
                    .await
                {
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
        (iteration, index): (u64, usize),
        limit: Option<Duration>,
    ) -> Option<Result<(), StepError>> {
        let started = Instant::now();
        self.last_excerpt.clear();
        // The step's future dropped at the limit ends its processes (a group each).
        let outcome = match limit {
            Some(limit) => tokio::time::timeout(limit, self.step(step))
                .await
                .unwrap_or(Err(StepError::StepTimeout { limit })),
            None => self.step(step).await,
        };
        let mut excerpt = std::mem::take(&mut self.last_excerpt);
        if let Err(e) = &outcome {
            excerpt = tail(&e.to_string());
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
                    self.vars
                        .insert(name.clone(), json!({"error": e.to_string()}));
                }
                (Ok(()), format!("skipped: {e}"))
            }
            Err(e) => {
                let text = format!("error: {e}");
                (Err(e), text)
            }
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
    ) -> Pin<Box<dyn std::future::Future<Output = Result<String, StepError>> + Send + 's>> {
        Box::pin(async move {
            let attempts = if step.on_error == OnError::Retry {
                3
            } else {
                1
            };
            let mut attempt = 1;
            loop {
                match self.execute(&step.kind).await {
                    Ok((value, outcome)) => {
                        if let (Some(name), Some(value)) = (&step.output_to, value) {
                            self.vars.insert(name.clone(), value);
                        }
                        return Ok(outcome);
                    }
                    Err(_) if attempt < attempts => attempt += 1,
                    Err(e) => return Err(e),
                }
            }
        })
    }
}

mod error;
mod steps;

pub use error::StepError;
