//! SPEC R3.3, the worked example, run through real monitors and listeners.
//!
//! The context is processing E1 while E2, E3, E4 wait in its inbox. While processing E1, En1 and En2
//! are sent to the context (back of the queue), then R1 and R2 are routed. R1 triggers two listeners,
//! which route R3 and R4; R3 routes R5. Every event is recorded by a listener when it is processed,
//! and emitted to an output channel in that order.
//!
//! Run: `cargo run -q --release -p correlator --example seed_order`
//! Prints: `E1 R1 R3 R5 R4 R2 E2 E3 E4 En1 En2`

use correlator::{Channel, Correlator, Event, Monitor, Pattern, Scope};

/// An event of the example: its name is its kind.
#[derive(Clone, Debug)]
struct Ev(&'static str);

impl Event for Ev {
    type Kind = &'static str;
    fn kind(&self) -> &'static str {
        self.0
    }
}

const ALL: [&str; 11] = [
    "E1", "E2", "E3", "E4", "En1", "En2", "R1", "R2", "R3", "R4", "R5",
];

type Cx<'a> = Scope<'a, Ev, Seed>;

/// The monitor of the worked example.
struct Seed {
    trace: Channel,
}

impl Monitor<Ev> for Seed {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        // Registered first, so it fires first for every event: the trace is the processing order.
        for name in ALL {
            cx.on_all(
                Pattern::kind(name),
                |m: &mut Seed, cx: &mut Cx<'_>, e: &Ev| {
                    cx.emit(m.trace, e.clone());
                },
            );
        }
        cx.on_all(
            Pattern::kind("E1"),
            |_: &mut Seed, cx: &mut Cx<'_>, _: &Ev| {
                let me = cx.context();
                cx.send_to(me, Ev("En1")).expect("main is running");
                cx.send_to(me, Ev("En2")).expect("main is running");
                cx.route(Ev("R1"));
                cx.route(Ev("R2"));
            },
        );
        // Two listeners on R1, each routing one event.
        cx.on_all(
            Pattern::kind("R1"),
            |_: &mut Seed, cx: &mut Cx<'_>, _: &Ev| cx.route(Ev("R3")),
        );
        cx.on_all(
            Pattern::kind("R1"),
            |_: &mut Seed, cx: &mut Cx<'_>, _: &Ev| cx.route(Ev("R4")),
        );
        cx.on_all(
            Pattern::kind("R3"),
            |_: &mut Seed, cx: &mut Cx<'_>, _: &Ev| cx.route(Ev("R5")),
        );
    }
}

/// Runs the example and returns the processing order.
pub fn seed_order() -> Result<Vec<&'static str>, Box<dyn std::error::Error>> {
    let c = Correlator::<Ev>::builder().build()?;
    let trace = c.channel("trace")?;
    let rx = c.output(trace);
    c.load(Seed { trace })?;
    // Queue E1..E4 before the context starts taking its inbox: E2..E4 are waiting when E1 is taken.
    let input = c.input();
    for name in ["E1", "E2", "E3", "E4"] {
        input.send_to(c.main(), Ev(name))?;
    }
    c.start();
    c.shutdown()?;
    Ok(rx.iter().map(|e| e.0).collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("{}", seed_order()?.join(" "));
    Ok(())
}
