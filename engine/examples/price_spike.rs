//! Trading: a price spike followed by a volume drop within 5 seconds raises an alert.
//!
//! `SpikeDetector` keeps the last price per symbol and routes a derived `Spike` event when a price
//! jumps by 5 % or more. `SpikeThenDrop` listens for every spike and, for each, registers the
//! expression `Volume(symbol = s, quantity < 50 % of normal).within(5 s)` through the keyed index:
//! it fires once if the drop comes in time and is removed when the bound passes. Time is driven from
//! the recorded stream, so the alerts are the same on every run.
//!
//! Run: `cargo run -q --release -p correlator --example price_spike`

use std::collections::HashMap;
use std::time::Duration;

use correlator::{Channel, Correlator, Event, Match, Monitor, Pattern, Scope, Time};

/// Market data, derived events and alerts.
#[derive(Clone, Debug, PartialEq)]
pub enum Market {
    Price { symbol: u64, price: f64 },
    Volume { symbol: u64, quantity: u64 },
    Spike { symbol: u64, from: f64, to: f64 },
    Alert { symbol: u64, at: Time, text: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Price,
    Volume,
    Spike,
    Alert,
}

impl Event for Market {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        match self {
            Market::Price { .. } => Kind::Price,
            Market::Volume { .. } => Kind::Volume,
            Market::Spike { .. } => Kind::Spike,
            Market::Alert { .. } => Kind::Alert,
        }
    }
    fn key(&self) -> Option<u64> {
        match self {
            Market::Price { symbol, .. }
            | Market::Volume { symbol, .. }
            | Market::Spike { symbol, .. }
            | Market::Alert { symbol, .. } => Some(*symbol),
        }
    }
}

/// A jump of at least this ratio is a spike.
pub const SPIKE: f64 = 1.05;
/// The normal traded quantity; a drop is below half of it.
pub const NORMAL_QUANTITY: u64 = 1_000;
/// How soon after the spike the drop must come.
pub const WINDOW: Duration = Duration::from_secs(5);

/// Routes `Spike` when a symbol's price jumps by [`SPIKE`] or more.
pub struct SpikeDetector {
    last: HashMap<u64, f64>,
}

impl Monitor<Market> for SpikeDetector {
    fn on_load(&mut self, cx: &mut Scope<'_, Market, Self>) {
        cx.on_all(
            Pattern::kind(Kind::Price),
            |m: &mut SpikeDetector, cx: &mut Scope<'_, Market, SpikeDetector>, e: &Market| {
                let Market::Price { symbol, price } = *e else {
                    return;
                };
                if let Some(prev) = m.last.insert(symbol, price) {
                    if price >= prev * SPIKE {
                        cx.route(Market::Spike {
                            symbol,
                            from: prev,
                            to: price,
                        });
                    }
                }
            },
        );
    }
}

/// For every spike, waits up to [`WINDOW`] for a volume drop of the same symbol.
pub struct SpikeThenDrop {
    alerts: Channel,
}

type Cx<'a> = Scope<'a, Market, SpikeThenDrop>;

impl Monitor<Market> for SpikeThenDrop {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        cx.on_all(Pattern::kind(Kind::Spike), |_, cx: &mut Cx<'_>, spike: &Market| {
            let Market::Spike { symbol, from, to } = *spike else { return };
            let drop = Pattern::kind(Kind::Volume)
                .key(symbol)
                .filter(|v: &Market| matches!(v, Market::Volume { quantity, .. } if *quantity < NORMAL_QUANTITY / 2));
            cx.when(
                drop.within(WINDOW),
                move |m: &mut SpikeThenDrop, cx: &mut Cx<'_>, hit: &Match<Market>| {
                    let Some(Market::Volume { quantity, .. }) = hit.events.first() else {
                        return;
                    };
                    let text = format!(
                        "price spike {from:.2} -> {to:.2} followed by volume drop to {quantity}"
                    );
                    cx.emit(
                        m.alerts,
                        Market::Alert {
                            symbol,
                            at: hit.time,
                            text,
                        },
                    );
                },
            );
        });
    }
}

/// A recorded stream: (milliseconds, event).
pub fn recording() -> Vec<(u64, Market)> {
    use Market::{Price, Volume};
    vec![
        (
            0,
            Price {
                symbol: 1,
                price: 100.0,
            },
        ),
        (
            0,
            Price {
                symbol: 2,
                price: 50.0,
            },
        ),
        (
            1_000,
            Volume {
                symbol: 1,
                quantity: 1_000,
            },
        ),
        // Symbol 1 spikes at 2 s; its volume drops at 4.5 s: alert.
        (
            2_000,
            Price {
                symbol: 1,
                price: 106.0,
            },
        ),
        (
            3_000,
            Volume {
                symbol: 1,
                quantity: 900,
            },
        ),
        (
            4_500,
            Volume {
                symbol: 1,
                quantity: 300,
            },
        ),
        // Symbol 2 spikes at 5 s; its volume drops only at 10 s, exactly at the bound: no alert.
        (
            5_000,
            Price {
                symbol: 2,
                price: 53.0,
            },
        ),
        (
            6_000,
            Volume {
                symbol: 1,
                quantity: 100,
            },
        ),
        (
            10_000,
            Volume {
                symbol: 2,
                quantity: 100,
            },
        ),
        // Symbol 2 spikes again at 11 s; a drop of symbol 1 does not count, its own at 12 s does.
        (
            11_000,
            Price {
                symbol: 2,
                price: 56.0,
            },
        ),
        (
            11_500,
            Volume {
                symbol: 1,
                quantity: 100,
            },
        ),
        (
            12_000,
            Volume {
                symbol: 2,
                quantity: 200,
            },
        ),
    ]
}

/// An alert: symbol, logical time, text.
pub type Alert = (u64, Time, String);

/// Replays the recording and returns the alerts, in order.
pub fn run() -> Result<Vec<Alert>, Box<dyn std::error::Error>> {
    let c = Correlator::<Market>::builder().external_time().build()?;
    let alerts = c.channel("alerts")?;
    let rx = c.output(alerts);
    c.load(SpikeDetector {
        last: HashMap::new(),
    })?;
    c.load(SpikeThenDrop { alerts })?;
    let input = c.input();
    c.start();
    for (ms, event) in recording() {
        input.send_time(Time::from_millis(ms))?;
        input.send_to(c.main(), event)?;
    }
    c.shutdown()?;
    Ok(rx
        .iter()
        .filter_map(|e| match e {
            Market::Alert { symbol, at, text } => Some((symbol, at, text)),
            _ => None,
        })
        .collect())
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (symbol, at, text) in run()? {
        println!("ALERT at {at}: symbol {symbol}: {text}");
    }
    Ok(())
}
