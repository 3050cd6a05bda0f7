//! maestro's entry point; everything it does starts in [`maestro::cli::main`].

#![forbid(unsafe_code)]

/// Every failure has a documented exit code (2 usage, 1 runtime, …) and is reported in
/// maestro's words; a panic reaches color-eyre's report.
fn main() -> std::process::ExitCode {
    maestro::cli::main()
}
