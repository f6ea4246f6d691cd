//! The command line (clap derive).

use crate::scenario::Mode;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Exit code of a run whose checks all passed.
pub const EXIT_OK: i32 = 0;
/// Exit code when at least one check failed.
pub const EXIT_CHECK_FAILED: i32 = 1;
/// Exit code for bad arguments or an unusable environment.
pub const EXIT_USAGE: i32 = 2;
/// Exit code of `harness compare` when a target regressed really (see [`crate::compare`]).
pub const EXIT_REGRESSION: i32 = 3;
/// The correlator's benchmark lab.
#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "Benchmark lab of the correlator engine: every BENCHMARKS.md scenario, each run in a fresh process, pinned, checked and reported",
    long_about = None
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every scenario id (for this machine's core count) with what it runs.
    List {
        /// Only ids matching this regular expression.
        #[arg(long)]
        filter: Option<String>,
    },
    /// Run scenarios and write a result folder.
    Run(RunArgs),
    /// Compare two result folders: environment differences, target ratios and absolute
    /// figures B/A, real changes marked; exit code 3 when a target regressed.
    Compare {
        /// The reference result folder.
        a: PathBuf,
        /// The result folder to compare with it.
        b: PathBuf,
        /// Print one JSON object instead of the table (for CI).
        #[arg(long)]
        json: bool,
    },
    /// Print the environment that `run` would record in env.json.
    Env {
        /// Pinning plan to resolve (as for `run`).
        #[arg(long, default_value = "auto")]
        pin: String,
    },
    /// Run one scenario once and print its JSON record (used by `run`, one process per run).
    #[command(hide = true)]
    RunOne(RunOneArgs),
}

/// Arguments of `harness run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Every scenario once with tiny windows (CI: proves they run and check themselves).
    #[arg(long, group = "mode")]
    pub smoke: bool,
    /// A couple of minutes in all (the default).
    #[arg(long, group = "mode")]
    pub quick: bool,
    /// The lab run: long windows, 7 runs per scenario.
    #[arg(long, group = "mode")]
    pub full: bool,
    /// Only scenarios whose id matches this regular expression.
    #[arg(long)]
    pub filter: Option<String>,
    /// Result folder (default: results/DATE-MACHINETAG-SHORTCOMMIT/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Pinning plan: `auto` (every available core, slot i -> core i), `none`, or a core list
    /// such as `0,2,4-7` (slot i -> i-th listed core).
    #[arg(long, default_value = "auto")]
    pub pin: String,
    /// Runs (fresh processes) per scenario (default: smoke 1, quick 5, full 7).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Human label of the machine written into env.json and report.md (e.g. "shared 2-core VM").
    #[arg(long)]
    pub label: Option<String>,
    /// Machine tag used in the default folder name (default: vmNcore or metalNcore, N = cores).
    #[arg(long)]
    pub tag: Option<String>,
    /// No progress bar (one line per finished scenario instead).
    #[arg(long)]
    pub no_progress: bool,
}

impl RunArgs {
    /// The selected mode (quick when none is given).
    pub fn mode(&self) -> Mode {
        if self.smoke {
            Mode::Smoke
        } else if self.full {
            Mode::Full
        } else {
            Mode::Quick
        }
    }
}

/// Arguments of the hidden `run-one`.
#[derive(Debug, Args)]
pub struct RunOneArgs {
    /// Scenario id.
    #[arg(long)]
    pub id: String,
    /// Mode (sizes).
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// Cores in slot order, as resolved by the parent (`0,1`).
    #[arg(long)]
    pub cores: String,
    /// Whether to pin.
    #[arg(long, action = clap::ArgAction::Set)]
    pub pinned: bool,
    /// Index of this run.
    #[arg(long, default_value_t = 0)]
    pub run_index: usize,
}
