//! `nats/loopback`: events through a local NATS server with the engine in the loop (the
//! `correlator-nats` connector's ingress, a monitor that emits each event, the egress receiver),
//! against raw async-nats publish/subscribe through the same server, in the same run. Both paths
//! are closed loops with the same window of events in flight; the measurement itself lives in
//! `correlator_nats::bench`, so the connector's own example runs the same code.
//!
//! The server is started by `scripts/nats-server.sh` (127.0.0.1, a free port, JetStream in a
//! temporary directory) and stopped afterwards. When none can be started the run records no
//! figure and says why in a note: it is skipped, not failed, because the server is an external
//! component the machine may not have (the test command installs it, a bare lab machine may not).

use super::Scenario;

/// Registers `nats/loopback`.
pub fn register(v: &mut Vec<Scenario>) {
    #[cfg(not(feature = "engine"))]
    v.push(super::engine::absent("nats/loopback".into(), 1));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "nats/loopback",
        "events/s and latency through a local nats-server: connector + engine vs raw async-nats pub/sub",
        1,
        super::Family::Engine,
        measure::run,
    ));
}

#[cfg(feature = "engine")]
mod measure {
    use super::super::{Outcome, RunCtx};
    use crate::record::Better;
    use correlator_nats::bench::{loopback_local, LoopbackOutcome, PathFigures};

    /// Events in flight at once on both paths.
    const WINDOW: u64 = 256;

    pub(super) fn run(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        let events = ctx.mode.pick(2_000, 50_000, 200_000);
        out.param("events", events);
        out.param("window", WINDOW);
        match loopback_local(events, WINDOW) {
            Ok(LoopbackOutcome::Measured(f)) => {
                record(&mut out, "engine", &f.engine, events);
                record(&mut out, "raw", &f.raw, events);
                out.value(
                    "throughput_ratio[engine/raw]",
                    "x",
                    f.engine.events_per_sec / f.raw.events_per_sec,
                    Better::Higher,
                );
                out.note(
                    "REPORTED: no target; the engine path adds one thread hop and one engine \
                     dispatch per event to the raw path",
                );
            }
            Ok(LoopbackOutcome::Skipped(note)) => out.note(note),
            Err(e) => out.fail(format!("nats/loopback: {e}")),
        }
        out
    }

    fn record(out: &mut Outcome, path: &str, f: &PathFigures, sent: u64) {
        out.check(f.events == sent, || {
            format!("{path}: {} of {sent} events arrived", f.events)
        });
        out.value(
            &format!("throughput[{path}]"),
            "events/s",
            f.events_per_sec,
            Better::Higher,
        );
        out.value(&format!("p50[{path}]"), "us", f.p50_us, Better::Lower);
        out.value(&format!("p99[{path}]"), "us", f.p99_us, Better::Lower);
    }
}
