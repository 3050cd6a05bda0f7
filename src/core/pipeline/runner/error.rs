//! Why a step failed: the reason a run reports (`step N: …`), its cause kept.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use crate::core::pipeline::expr::ConditionError;
use crate::core::pipeline::interpolate::FillError;
use crate::core::pipeline::output::NoSlot;

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A variable the step's text names is not set, or a value would become code.
    #[error(transparent)]
    Fill(#[from] FillError),
    #[error(transparent)]
    Condition(#[from] ConditionError),
    /// The limit of live step processes is reached.
    #[error(transparent)]
    NoSlot(#[from] NoSlot),
    #[error("params.cwd {dir:?} is not a folder inside the project")]
    OutsideProject { dir: String },
    #[error("cannot run {program}: {source}")]
    Start { program: String, source: io::Error },
    #[error("{program} timed out after {after:?}; its processes were ended")]
    TimedOut { program: String, after: Duration },
    #[error("stopped; the step's processes were ended")]
    Stopped,
    #[error(
        "the step ran past safety.maxStepTimeoutMs ({} ms); its processes were ended",
        .limit.as_millis()
    )]
    StepTimeout { limit: Duration },
    /// A command held to `safety.maxMemoryMb` failed: most likely it wanted more.
    #[error(
        "{program} failed ({status}) with its processes held to safety.maxMemoryMb ({budget_mb} MB of address space): most likely it needed more; raise maxMemoryMb or make the step smaller"
    )]
    PastMemoryBudget {
        program: String,
        budget_mb: u64,
        status: ExitStatus,
    },
    #[error("no running execution {id:?}")]
    NoExecution { id: String },
    #[error(
        "llm steps need `[pipelines] llm` in the configuration (for example [\"claude\", \"-p\"])"
    )]
    NoProvider,
    /// Writing the prompt to the provider, or waiting for it, failed.
    #[error(transparent)]
    Provider(io::Error),
    #[error("stopped; the provider's processes were ended")]
    ProviderStopped,
    #[error("{program} exited with {status}")]
    ProviderFailed { program: String, status: ExitStatus },
    #[error("nested pipeline failed: {why}")]
    Nested { why: String },
}
