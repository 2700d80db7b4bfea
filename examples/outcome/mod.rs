//! How the examples end: the body's outcome, and the exit code that reports it.

use std::process::ExitCode;

/// What an example's body returns: `Err` explains the first broken expectation.
pub type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit code of an example's body, printing its error after `NAME: `.
pub fn exit(name: &str, run: Res) -> ExitCode {
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
