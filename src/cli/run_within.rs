//! `maestro run-within`: a pipeline's command step under `safety.maxMemoryMb`. The
//! address-space limit is set on this process and the step's program replaces it
//! (`exec`), so the limit holds from the program's first instruction and passes to
//! everything it starts; no code runs between a fork and an exec.

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use crate::cli::args::RunWithinArgs;
use crate::cli::error::CliError;

pub fn run(args: &RunWithinArgs) -> Result<ExitCode, CliError> {
    use nix::sys::resource::{Resource, setrlimit};
    let Some((program, rest)) = args.argv.split_first() else {
        return Err(CliError::Usage("run-within needs a program to run".into()));
    };
    setrlimit(Resource::RLIMIT_AS, args.memory_bytes, args.memory_bytes).map_err(|e| {
        CliError::Runtime(format!(
            "cannot hold the step to {} bytes of address space: {e}",
            args.memory_bytes
        ))
    })?;
    let error = std::process::Command::new(program).args(rest).exec();
    Err(CliError::Runtime(format!(
        "cannot run {}: {error}",
        program.to_string_lossy()
    )))
}
