//! maestro's entry point; everything it does starts in [`maestro::cli::main`].

#![forbid(unsafe_code)]

/// A failure with a documented exit code (2 usage, 1 runtime, …) is reported in
/// maestro's words and exits with it; anything else reaches color-eyre's report.
fn main() -> color_eyre::Result<std::process::ExitCode> {
    maestro::cli::main()
}
