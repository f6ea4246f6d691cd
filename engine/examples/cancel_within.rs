//! Trading surveillance on event time: "a cancel within 50 ms of a large trade" raises an alert.
//!
//! Every trade and cancel carries its own timestamp ([`Event::time`]), and the correlator is built
//! with [`event_time`](correlator::CorrelatorBuilder::event_time): each context moves its logical
//! clock to the stamp of the event it takes, firing the timers due before it first. So a cancel
//! 49 ms after its trade raises an alert and one 65 ms after does not, whether the recording is
//! replayed as fast as possible or paced on the wall clock: the output depends only on the stamps.
//! (With the default clock, 10 ticks per second, `within(50ms)` would mean "before the next
//! tick", and the answer would depend on when the events happened to arrive.)
//!
//! `within` is exclusive: a cancel exactly 50 ms after its trade is too late.
//!
//! Run: `cargo run -q --release -p correlator --example cancel_within [SPEED]`, where `SPEED` is
//! how many times faster than real time the feeder paces the recording (default: no pacing).

use std::time::{Duration, Instant};

use correlator::{Channel, Correlator, Event, Match, Monitor, Pattern, Scope, Time};

/// Orders, and the alerts the monitor emits.
#[derive(Clone, Debug, PartialEq)]
pub enum Order {
    Trade { order: u64, quantity: u64, at: Time },
    Cancel { order: u64, at: Time },
    Alert { order: u64, text: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Trade,
    Cancel,
    Alert,
}

impl Event for Order {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        match self {
            Order::Trade { .. } => Kind::Trade,
            Order::Cancel { .. } => Kind::Cancel,
            Order::Alert { .. } => Kind::Alert,
        }
    }
    fn key(&self) -> Option<u64> {
        match self {
            Order::Trade { order, .. }
            | Order::Cancel { order, .. }
            | Order::Alert { order, .. } => Some(*order),
        }
    }
    fn time(&self) -> Option<Time> {
        match self {
            Order::Trade { at, .. } | Order::Cancel { at, .. } => Some(*at),
            Order::Alert { .. } => None,
        }
    }
}

/// A trade of at least this quantity is large.
pub const LARGE: u64 = 1_000;
/// How soon after a large trade a cancel raises an alert (exclusive).
pub const WINDOW: Duration = Duration::from_millis(50);

/// For every large trade, waits up to [`WINDOW`] for a cancel of the same order.
pub struct CancelAfterLargeTrade {
    alerts: Channel,
}

type Cx<'a> = Scope<'a, Order, CancelAfterLargeTrade>;

impl Monitor<Order> for CancelAfterLargeTrade {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        cx.on_all(
            Pattern::kind(Kind::Trade),
            |_, cx: &mut Cx<'_>, e: &Order| {
                let Order::Trade {
                    order,
                    quantity,
                    at,
                } = *e
                else {
                    return;
                };
                if quantity < LARGE {
                    return;
                }
                let cancel = Pattern::kind(Kind::Cancel).key(order);
                cx.when(
                    cancel.within(WINDOW),
                    move |m: &mut CancelAfterLargeTrade, cx: &mut Cx<'_>, hit: &Match<Order>| {
                        let lag = (hit.time - at).as_millis();
                        let text = format!(
                            "cancelled {lag} ms after a trade of {quantity} (at {})",
                            hit.time
                        );
                        cx.emit(m.alerts, Order::Alert { order, text });
                    },
                );
            },
        );
    }
}

/// A recorded stream of trades and cancels, in time order.
pub fn recording() -> Vec<Order> {
    let trade = |ms, order, quantity| Order::Trade {
        order,
        quantity,
        at: Time::from_millis(ms),
    };
    let cancel = |ms, order| Order::Cancel {
        order,
        at: Time::from_millis(ms),
    };
    vec![
        trade(0, 1, 5_000),
        cancel(49, 1), // 49 ms after a large trade: alert
        trade(100, 2, 5_000),
        cancel(165, 2), // 65 ms: too late, no alert
        trade(200, 3, 10),
        cancel(210, 3), // a small trade: no alert
        trade(300, 4, 2_000),
        cancel(350, 4), // exactly 50 ms: the bound is exclusive, no alert
        trade(400, 5, 3_000),
        trade(420, 6, 3_000),
        cancel(440, 6), // 20 ms: alert
        cancel(470, 5), // 70 ms: no alert
    ]
}

/// Replays the recording, paced `speed` times faster than real time (`None`: no pacing), and
/// returns the output lines: the alerts in order, then the count of late events.
pub fn run(speed: Option<f64>) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let c = Correlator::<Order>::builder().event_time().build()?;
    let alerts = c.channel("alerts")?;
    let rx = c.output(alerts);
    c.load(CancelAfterLargeTrade { alerts })?;
    let input = c.input();
    c.start();
    let origin = Instant::now();
    for event in recording() {
        if let (Some(speed), Some(at)) = (speed, event.time()) {
            let due = origin + at.since_origin().div_f64(speed);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        input.send_to(c.main(), event)?;
    }
    let status = c.shutdown()?;
    let mut lines: Vec<String> = rx
        .iter()
        .filter_map(|e| match e {
            Order::Alert { order, text } => Some(format!("ALERT order {order}: {text}")),
            _ => None,
        })
        .collect();
    lines.push(format!("late events: {}", status.totals.late_events));
    Ok(lines)
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let speed = match std::env::args().nth(1) {
        Some(s) => Some(s.parse::<f64>()?).filter(|s| *s > 0.0),
        None => None,
    };
    for line in run(speed)? {
        println!("{line}");
    }
    Ok(())
}
