//! The `nats/loopback` bench: events/s and p50/p99 latency through a local NATS server with the
//! engine in the loop, against raw async-nats publish/subscribe, in the same run.
//!
//! `cargo run --release -p correlator-nats --example loopback -- [EVENTS] [WINDOW]`
//! (defaults 100000 and 256). Starts its own server through `scripts/nats-server.sh`; prints a
//! note and exits 0 when none can be started.

use correlator_nats::bench::{loopback_local, LoopbackOutcome};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let events: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let window: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(256);
    match loopback_local(events, window)? {
        LoopbackOutcome::Skipped(note) => println!("{note}"),
        LoopbackOutcome::Measured(f) => {
            println!("nats/loopback: {events} events, window {window}");
            for (name, p) in [("engine", f.engine), ("raw", f.raw)] {
                println!(
                    "  {name:<6} {:>10.0} events/s  p50 {:>8.1} us  p99 {:>8.1} us  ({} received)",
                    p.events_per_sec, p.p50_us, p.p99_us, p.events
                );
            }
        }
    }
    Ok(())
}
