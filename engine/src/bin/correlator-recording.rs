//! Prints a recording's summary: `correlator-recording print run.rec` (see `engine/RECORDING.md`).
//! Replaying needs the user's monitors: a program that links them calls
//! `correlator::record::cli::main` with its replay.

fn main() -> std::process::ExitCode {
    correlator::record::cli::main(None)
}
