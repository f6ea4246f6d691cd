//! `workload/absence`, `workload/absence/twin`: heartbeat absence per device (issue 31).
//!
//! # The rule (the same on both sides)
//! Alert when a device sends no heartbeat for [`SILENCE_MS`]. The engine's idiom, per device
//! (one instance per device, `load_per_key`): `when_all(hb.then(not(hb).within(d)))`. `when_all`
//! starts a fresh match at every heartbeat; its `not(hb).within(d)`, started at that heartbeat,
//! fails at the device's next heartbeat if that one is stamped before `t + d`, and matches when
//! the clock reaches `t + d` otherwise (the bound is exclusive, and under event time a timer due
//! at or before an event's stamp fires before that event: SPEC, Decisions: event time). So the
//! listener fires once per silence, `d` after the last heartbeat before it, and never while a
//! device keeps its period; an alert is `(device, last heartbeat's id, due time in ms)`.
//! `not(hb).within(d)` alone (without `hb.then`) would be counted from the listener's
//! registration, not from each heartbeat; `wait(d).and(not(hb))` is the same as the idiom's
//! right side: the idiom is the shortest expression of "d after the last heartbeat".
//!
//! # End of stream
//! Once every heartbeat is sent the producer moves the clock to `end_ms` (`send_time`): the
//! absences due by then fire, on both sides; the ones due later do not (a live device's last
//! heartbeat is younger than `d` then, so only the planted silences fire).
//!
//! # The data
//! Devices (sparse ids) beat every [`PERIOD_MS`], one after the other through each period, for
//! [`ROUNDS`] periods; exactly 1 % of them go silent at a seeded round early enough for the
//! silence to be due before the end: the run must raise exactly that many alerts.

use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin};
use crate::scenario::{Outcome, RunCtx, Scenario};
use std::collections::VecDeque;

/// A device's heartbeat period, ms.
pub const PERIOD_MS: u64 = 10_000;
/// Silence that raises an alert (2.5 periods), ms.
pub const SILENCE_MS: u64 = 25_000;
/// Periods in the stream.
pub const ROUNDS: u64 = 10;
/// One device in this many goes silent.
const SILENT_ONE_IN: u64 = 100;
/// The generator's seed.
const SEED: u64 = 0xab5e_0ce5;

/// Devices per mode.
fn devices(mode: crate::scenario::Mode) -> u64 {
    mode.pick(2_000, 100_000, 100_000)
}

/// Where the clock moves at the end: half a period after the last round.
fn end_ms() -> u64 {
    ROUNDS * PERIOD_MS + PERIOD_MS / 2
}

/// A heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hb {
    /// Its number in the stream.
    pub id: u64,
    /// The device (the key).
    pub device: u64,
    /// Event time, ms.
    pub t_ms: u64,
}

/// The stream and the number of silent devices.
fn generate(n: u64) -> (Data<Hb>, usize) {
    let mut rng = Rng::new(SEED);
    // Device j goes silent from round `stop[j]` on (ROUNDS: never). A silence must be due before
    // the end: its last beat is in round stop - 1, due 2.5 periods later.
    let stop: Vec<u64> = (0..n)
        .map(|j| {
            if j % SILENT_ONE_IN == SILENT_ONE_IN / 2 {
                rng.range(1, ROUNDS - 2)
            } else {
                ROUNDS
            }
        })
        .collect();
    let silent = stop.iter().filter(|&&s| s < ROUNDS).count();
    let mut events = Vec::with_capacity((n * ROUNDS) as usize);
    for k in 0..ROUNDS {
        for j in 0..n {
            if k < stop[j as usize] {
                events.push(Hb {
                    id: events.len() as u64,
                    device: mix(j ^ SEED),
                    t_ms: k * PERIOD_MS + j * PERIOD_MS / n,
                });
            }
        }
    }
    let data = Data {
        events: events.into(),
        end_ms: end_ms(),
    };
    (data, silent)
}

/// The rule by hand: each device's last heartbeat, and the absences pending in due order. The
/// silence is the same for every device and time never goes back, so due times arrive in order:
/// a FIFO is the timer queue (no heap needed).
#[derive(Default)]
struct AbsenceTwin {
    last: FastMap<u64, u64>,
    due: VecDeque<(u64, u64, u64)>,
}

impl AbsenceTwin {
    /// Fires every absence due at or before `now` whose device has not beaten since.
    #[inline]
    fn expire(&mut self, now: u64, alerts: &mut Vec<Alert>) {
        while let Some(&(due, device, id)) = self.due.front() {
            if due > now {
                break;
            }
            self.due.pop_front();
            if self.last.get(&device) == Some(&id) {
                alerts.push(Alert {
                    rule: 0,
                    key: device,
                    first: id,
                    last: due,
                });
            }
        }
    }
}

impl Twin<Hb> for AbsenceTwin {
    #[inline]
    fn step(&mut self, hb: &Hb, alerts: &mut Vec<Alert>) {
        self.expire(hb.t_ms, alerts);
        self.last.insert(hb.device, hb.id);
        self.due.push_back((hb.t_ms + SILENCE_MS, hb.device, hb.id));
    }

    fn end(&mut self, end_ms: u64, alerts: &mut Vec<Alert>) {
        self.expire(end_ms, alerts);
    }
}

/// Registers `workload/absence` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent(
        "workload/absence".into(),
        2,
    ));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/absence",
        "heartbeat absence, when_all(hb -> not(hb) within 25 s) per device (load_per_key), 1 % of devices go silent, event time, one context: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/absence/twin",
        "workload/absence by hand: a FastMap<device, last beat> and a FIFO of due times in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Hb>>) -> Outcome {
    let mut out = Outcome::default();
    let n = devices(ctx.mode);
    out.param("devices", n);
    let (data, silent) = generate(n);
    out.param("silent_devices", silent as u64);
    let expect = Expect::Exactly(silent);
    measure(&mut out, ctx, &data, AbsenceTwin::default, engine, expect);
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use correlator::{not, Event, Match, Monitor, Output, Pattern, Scope, Time};
    use std::time::Duration;

    impl Event for Hb {
        type Kind = ();
        #[inline]
        fn kind(&self) {}
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.device)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_millis(self.t_ms))
        }
    }

    type Cx<'a, M> = Scope<'a, Hb, M>;

    /// One device's instance.
    struct Device {
        device: u64,
        /// The first heartbeat, handed to the factory (routed from `on_load`).
        first: Option<Hb>,
        alerts: Output<Alert>,
    }

    impl Monitor<Hb> for Device {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            let hb = || Pattern::kind(()).key(self.device);
            let silence = Duration::from_millis(SILENCE_MS);
            cx.when_all(
                hb().then(not(hb()).within(silence)),
                |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Hb>| {
                    let a = Alert {
                        rule: 0,
                        key: m.device,
                        first: hit.events[0].id,
                        last: hit.time.as_nanos() / 1_000_000,
                    };
                    // A value not queued is counted (`output_drops` in the status).
                    let _queued = cx.emit_to(&m.alerts, a);
                },
            );
            if let Some(first) = self.first.take() {
                cx.route(first);
            }
        }
    }

    /// The instance of `device`, made from its first event (routed from `on_load`).
    fn factory(device: u64, first: &Hb, alerts: Output<Alert>) -> Device {
        Device {
            device,
            first: Some(*first),
            alerts,
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Hb>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_keyed(ctx, data, built, [()], factory)
    }
    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn r7_2_an_absence_fires_once_at_its_due_time_before_an_event_stamped_then() {
            let d = SILENCE_MS;
            let beats = [
                (1, 0),
                (2, 0),
                (3, 0),
                (1, 10_000),
                (3, d - 1),
                // Device 2's next beat is stamped exactly at the due time: the absence fires
                // first (the bound is exclusive; due timers fire before the event).
                (2, d),
                (2, d + 5_000),
            ];
            let events: Vec<Hb> = beats
                .iter()
                .enumerate()
                .map(|(id, &(device, t_ms))| Hb {
                    id: id as u64,
                    device,
                    t_ms,
                })
                .collect();
            // At the end (the clock moved by send_time): device 1 has been silent since 10 s,
            // due at 35 s; device 3's last beat is due after the end, device 2's too.
            let end = 10_000 + d;
            let (got, want) =
                engine::engine_and_twin(events, end, [()], factory, AbsenceTwin::default());
            assert_eq!(got, want, "engine vs twin");
            let alert = |key, first, last| Alert {
                rule: 0,
                key,
                first,
                last,
            };
            assert_eq!(got, [alert(1, 3, 10_000 + d), alert(2, 1, d)]);
        }
    }
}
