//! maestro's entry point; everything it does starts in [`maestro::cli::main`].

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    maestro::cli::main()
}
