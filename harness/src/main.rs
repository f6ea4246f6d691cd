//! `harness`: the benchmark lab binary. See the library docs for the design.

use clap::Parser;
use harness::cli::{Cli, Command};

#[global_allocator]
static GLOBAL: harness::alloc::CountingAlloc = harness::alloc::CountingAlloc;

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::List { filter } => harness::runner::list(filter.as_deref()),
        Command::Run(a) => harness::runner::run(a),
        Command::Compare { a, b, json } => harness::compare::run(a, b, *json),
        Command::Env { pin } => harness::runner::env_cmd(pin),
        Command::RunOne(a) => harness::runner::run_one(a),
    };
    std::process::exit(code);
}
