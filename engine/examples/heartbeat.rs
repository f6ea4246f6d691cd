//! Telemetry: raise an alarm when a device sends no heartbeat for 5 seconds.
//!
//! One monitor instance per device (spawned on its first heartbeat) keeps a *watchdog*: the event
//! expression `not(heartbeat of this device).within(5 s)`, registered anew at every heartbeat. The
//! next heartbeat makes the pending watchdog fail (and removes it), so only a silence of 5 s fires.
//! Time is driven externally from a recorded stream, so the run is deterministic.
//!
//! Run: `cargo run -q --release -p correlator --example heartbeat`

use std::collections::HashSet;
use std::time::Duration;

use correlator::{not, Channel, Correlator, Event, Match, Monitor, Pattern, Scope, Time};

/// Telemetry events.
#[derive(Clone, Debug, PartialEq)]
pub enum Telemetry {
    /// A device is alive.
    Heartbeat { device: u64 },
    /// Raised by the monitor.
    Alarm { device: u64, at: Time },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Heartbeat,
    Alarm,
}

impl Event for Telemetry {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        match self {
            Telemetry::Heartbeat { .. } => Kind::Heartbeat,
            Telemetry::Alarm { .. } => Kind::Alarm,
        }
    }
    fn key(&self) -> Option<u64> {
        match self {
            Telemetry::Heartbeat { device } | Telemetry::Alarm { device, .. } => Some(*device),
        }
    }
}

/// How long a device may stay silent.
pub const SILENCE: Duration = Duration::from_secs(5);

type Cx<'a> = Scope<'a, Telemetry, Watchdog>;

/// The monitor: the first instance tracks which devices it has seen; each device gets its own
/// instance with `device` set.
#[derive(Clone)]
pub struct Watchdog {
    alarms: Channel,
    device: Option<u64>,
    seen: HashSet<u64>,
}

impl Watchdog {
    fn arm(device: u64, cx: &mut Cx<'_>) {
        let silence = not(Pattern::kind(Kind::Heartbeat).key(device)).within(SILENCE);
        cx.when(
            silence,
            |m: &mut Watchdog, cx: &mut Cx<'_>, hit: &Match<Telemetry>| {
                if let Some(device) = m.device {
                    cx.emit(
                        m.alarms,
                        Telemetry::Alarm {
                            device,
                            at: hit.time,
                        },
                    );
                }
            },
        );
    }
}

impl Monitor<Telemetry> for Watchdog {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        cx.on_all(
            Pattern::kind(Kind::Heartbeat),
            |m: &mut Watchdog, cx: &mut Cx<'_>, e: &Telemetry| {
                let Telemetry::Heartbeat { device } = *e else {
                    return;
                };
                if !m.seen.insert(device) {
                    return;
                }
                let mut child = m.clone();
                child.device = Some(device);
                cx.spawn(&child, move |_, cx: &mut Cx<'_>| {
                    Watchdog::arm(device, cx);
                    cx.on_all(
                        Pattern::kind(Kind::Heartbeat).key(device),
                        move |_, cx: &mut Cx<'_>, _| {
                            // The pending watchdog sees this heartbeat and ends; a new one starts now.
                            Watchdog::arm(device, cx);
                        },
                    );
                });
            },
        );
    }
}

/// A recorded stream: (seconds, device) heartbeats.
pub const RECORDING: &[(u64, u64)] = &[
    (0, 1),
    (0, 2),
    (2, 1),
    (4, 1),
    (4, 2),
    (6, 1),
    (8, 1),
    // Device 1 is silent from 8 s: the tick to 13 s comes before this heartbeat and reaches the
    // bound of the watchdog armed at 8 s, so the alarm fires at exactly 13 s; the heartbeat re-arms.
    (13, 1),
    (15, 1),
];

/// Replays the recording until `end` seconds and returns the alarms, in order.
pub fn run(end: u64) -> Result<Vec<(u64, Time)>, Box<dyn std::error::Error>> {
    let c = Correlator::<Telemetry>::builder().external_time().build()?;
    let alarms = c.channel("alarms")?;
    let rx = c.output(alarms);
    c.load(Watchdog {
        alarms,
        device: None,
        seen: HashSet::new(),
    })?;
    let input = c.input();
    c.start();
    for &(secs, device) in RECORDING {
        input.send_time(Time::from_secs(secs))?;
        input.send_to(c.main(), Telemetry::Heartbeat { device })?;
    }
    input.send_time(Time::from_secs(end))?;
    c.shutdown()?;
    Ok(rx
        .iter()
        .filter_map(|e| match e {
            Telemetry::Alarm { device, at } => Some((device, at)),
            Telemetry::Heartbeat { .. } => None,
        })
        .collect())
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (device, at) in run(25)? {
        println!(
            "ALARM at {at}: device {device} sent no heartbeat for {}s",
            SILENCE.as_secs()
        );
    }
    Ok(())
}
