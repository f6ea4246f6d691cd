//! The recording tool: `print` a recording's summary, `replay` it against the user's monitors.
//!
//! The crate's `correlator-recording` binary runs [`main`] without a replay (it cannot know the
//! user's monitors): it prints. A program that links the monitors passes its replay to [`main`]:
//!
//! ```no_run
//! use correlator::record::{cli, Recording};
//! use correlator::{Correlator, Error, Event};
//! # #[derive(Clone, Debug)] struct Tick;
//! # impl Event for Tick { type Kind = (); fn kind(&self) {} }
//! fn replay(recording: Recording) -> Result<(), Error> {
//!     let c = Correlator::<Tick>::builder().replay(recording).build()?;
//!     // ... the same contexts, monitors and input handles as the recorded program,
//!     // then feed each handle its events from the durable source ...
//!     c.start();
//!     c.shutdown().map(|_| ())
//! }
//! fn main() -> std::process::ExitCode {
//!     cli::main(Some(&mut replay))
//! }
//! ```
//!
//! Owns the tool's arguments and messages. May import the leaves.

use std::io::Write;
use std::process::ExitCode;

use super::Recording;
use crate::error::Error;

/// What a replaying program passes to [`main`]: builds the correlator with
/// [`replay`](crate::CorrelatorBuilder::replay), feeds it and shuts it down.
pub type Replay<'a> = &'a mut dyn FnMut(Recording) -> Result<(), Error>;

/// Exit statuses: done, the replay diverged, a usage or read error.
pub const EXIT_OK: u8 = 0;
/// See [`EXIT_OK`].
pub const EXIT_DIVERGED: u8 = 1;
/// See [`EXIT_OK`].
pub const EXIT_USAGE: u8 = 2;

const USAGE: &str = "usage: <tool> print <recording>   the contexts, entries per sender, ticks, emits, time span
       <tool> replay <recording>  replays it against this program's monitors (exit 1 if it diverges)";

/// Runs the tool on the process's arguments, printing to stdout and stderr.
pub fn main(replay: Option<Replay<'_>>) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = run(
        &args,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
        replay,
    );
    ExitCode::from(code)
}

/// The tool on `args` (without the program's name), writing its report to `out` and its errors
/// to `err`; returns the exit status.
pub fn run(
    args: &[String],
    out: &mut dyn Write,
    err: &mut dyn Write,
    replay: Option<Replay<'_>>,
) -> u8 {
    let (command, path) = match args {
        [c, p] => (c.as_str(), p.as_str()),
        _ => {
            let _ = writeln!(err, "{USAGE}");
            return EXIT_USAGE;
        }
    };
    let recording = match Recording::open(path) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(err, "{path}: {e}");
            return EXIT_USAGE;
        }
    };
    match (command, replay) {
        ("print", _) => {
            let _ = write!(out, "{}", recording.summary());
            EXIT_OK
        }
        ("replay", Some(replay)) => {
            let contexts = recording.contexts().len();
            match replay(recording) {
                Ok(()) => {
                    let _ = writeln!(
                        out,
                        "replay agrees with the recording ({contexts} contexts)"
                    );
                    EXIT_OK
                }
                Err(Error::Diverged(d)) => {
                    let _ = writeln!(out, "{d}");
                    EXIT_DIVERGED
                }
                Err(e) => {
                    let _ = writeln!(err, "the replay failed: {e}");
                    EXIT_USAGE
                }
            }
        }
        ("replay", None) => {
            let _ = writeln!(
                err,
                "replay needs your monitors: call correlator::record::cli::main(Some(&mut replay)) \
                 from a program that builds them (see its documentation)"
            );
            EXIT_USAGE
        }
        _ => {
            let _ = writeln!(err, "{USAGE}");
            EXIT_USAGE
        }
    }
}
