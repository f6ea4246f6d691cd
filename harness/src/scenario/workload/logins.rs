//! `workload/logins`, `workload/logins/twin`: more than five failed logins per user within a
//! sliding five minutes, a count over a sliding window (issue 34: stream queries).
//!
//! # The rule (the same on both sides)
//! Per user, the window holds the failed logins of the last [`WINDOW_MS`]: a failure stamped `t`
//! is in it from `t` until `t + 5 min` exclusive (under event time a timer due at or before an
//! event's stamp fires first, so a failure leaves before anything stamped `t + 5 min` is
//! processed). Alert `(6, user, id, n)` for every failure after which the user's window holds
//! `n` > [`LIMIT`] failures, i.e. those stamped in `(t - 5 min, t]` up to and including this
//! one. Successful logins do not count. The engine, one monitor instance on one context:
//! `cx.query(Query::over(failed).partition_by(user).value(id).window(Window::sliding(5 min))
//! .aggregate((Count, Last::of(id))), handler)`, a row handed on every failure right after it
//! entered, the handler alerting when the count is above five; a row carries the aggregate, not
//! the event, so `Last` of the id (the id last added) names the failure that handed it. The twin: a
//! `FastMap<user, VecDeque<t>>` in one consumer thread, fed through an `rtrb` ring: at a
//! failure, pop the front while `front + 5 min <= t`, push, alert if more than five; a success
//! is not looked up.
//!
//! # The data
//! Seeded: `users` sparse ids (`mix`); background logins pick a user uniformly, 10 % fail; time
//! moves 0 to `2 · SPAN / n` ms per login (uniform), so every mode's stream spans about
//! [`SPAN_MS`] (33 min: 0-2 ms per login for two million; smoke's 20,000 move 0-200 ms each, so
//! that smoke, too, sees windows slide). A user sees a couple of logins in the whole stream:
//! background alerts are rare. One user in 400 (`ATTACKED_ONE_IN`) is attacked: one or two
//! bursts, each at a seeded time, of 6 to 12 failures 1 to 12 s apart (at most 132 s: a burst
//! lies in one window, so each raises at least one alert, at its sixth failure). Sorted by time
//! (stable), then numbered. The event is [`Login`]: `workload/burst`'s fields, with its kind the
//! outcome (a failed login and a successful one are two kinds of event, as a correlator's
//! `LoginFailed` and `LoginSucceeded` would be: the query listens to failures only, and the
//! twin skips a success with one test).

/// A login; its event kind (the engine's) is whether it succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Login {
    /// Its number in the stream.
    pub id: u64,
    /// The user (the key).
    pub user: u64,
    /// Event time, ms.
    pub t_ms: u64,
    /// Whether it succeeded.
    pub ok: bool,
}
use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin};
use crate::scenario::{Outcome, RunCtx, Scenario};
use std::collections::VecDeque;

/// The window (exclusive at its end), ms.
pub const WINDOW_MS: u64 = 300_000;
/// Failures in the window that are still fine: one more alerts.
pub const LIMIT: usize = 5;
/// About how long every mode's stream lasts, ms.
pub const SPAN_MS: u64 = 2_000_000;
/// One user in this many is attacked.
const ATTACKED_ONE_IN: u64 = 400;
/// The alerts' rule number.
const RULE: u8 = 6;
/// The generator's seed.
const SEED: u64 = 0x106_1e55;

/// `(users, background logins)` per mode (the attacks add about 0.2 %).
fn sizes(mode: crate::scenario::Mode) -> (u64, u64) {
    mode.pick(
        (5_000, 20_000),
        (1_000_000, 2_000_000),
        (1_000_000, 2_000_000),
    )
}

/// The alert for the failure `id` of `user`, after which its window holds `n` failures.
fn alert(user: u64, id: u64, n: usize) -> Alert {
    Alert {
        rule: RULE,
        key: user,
        first: id,
        last: n as u64,
    }
}

/// The stream: `n` background logins over `users` users, and the attacks; also how many bursts
/// were planted (each raises at least one alert).
fn generate(users: u64, n: u64) -> (Data<Login>, usize) {
    let mut rng = Rng::new(SEED);
    let keys: Vec<u64> = (0..users).map(|i| mix(i ^ SEED)).collect();
    let step = 2 * SPAN_MS / n.max(1);
    let mut t = 0;
    let mut events: Vec<Login> = Vec::with_capacity(n as usize + n as usize / 100);
    events.extend((0..n).map(|_| {
        t += rng.below(step + 1);
        Login {
            id: 0,
            user: keys[rng.below(users) as usize],
            t_ms: t,
            ok: !rng.chance(100),
        }
    }));
    let end = t;
    let mut bursts = 0;
    for (j, &user) in keys.iter().enumerate() {
        if j as u64 % ATTACKED_ONE_IN != ATTACKED_ONE_IN / 2 {
            continue;
        }
        for _ in 0..rng.range(1, 2) {
            // Early enough for the whole burst (at most 11 gaps of 12 s) to lie in the stream.
            let mut at = rng.below(end.saturating_sub(132_000).max(1));
            for _ in 0..rng.range(6, 12) {
                events.push(Login {
                    id: 0,
                    user,
                    t_ms: at,
                    ok: false,
                });
                at += rng.range(1_000, 12_000);
            }
            bursts += 1;
        }
    }
    events.sort_by_key(|l| l.t_ms);
    for (id, l) in events.iter_mut().enumerate() {
        l.id = id as u64;
    }
    let data = Data {
        events: events.into(),
        end_ms: end,
    };
    (data, bursts)
}

/// The rule by hand: a map from user to the stamps of its failures in the window, oldest first.
#[derive(Default)]
struct LoginsTwin {
    users: FastMap<u64, VecDeque<u64>>,
}

impl Twin<Login> for LoginsTwin {
    #[inline]
    fn step(&mut self, l: &Login, alerts: &mut Vec<Alert>) {
        if l.ok {
            return;
        }
        let window = self.users.entry(l.user).or_default();
        while window.front().is_some_and(|&t| t + WINDOW_MS <= l.t_ms) {
            window.pop_front();
        }
        window.push_back(l.t_ms);
        if window.len() > LIMIT {
            alerts.push(alert(l.user, l.id, window.len()));
        }
    }

    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<Alert>) {}
}

/// Registers `workload/logins` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("workload/logins".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/logins",
        "more than 5 failed logins per user within a sliding 5 minutes, one stream query (over failed logins, partition_by user, Window::sliding(5 min), Count, a row per failure) in one monitor on one context, 1,000,000 users, event time: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/logins/twin",
        "workload/logins by hand: a FastMap<user, VecDeque of failure stamps> in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Login>>) -> Outcome {
    let mut out = Outcome::default();
    let (users, n) = sizes(ctx.mode);
    out.param("users", users);
    let (data, bursts) = generate(users, n);
    out.param("planted_bursts", bursts as u64);
    let failures = data.events.iter().filter(|l| !l.ok).count();
    out.param("failures", failures as u64);
    // At least one alert per planted burst, at most one per failure.
    let expect = Expect::Between(bursts, failures);
    measure(&mut out, ctx, &data, LoginsTwin::default, engine, expect);
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use correlator::query::{Count, Last, Query, Row, Window};
    use correlator::{Event, Monitor, Output, Pattern, Scope, Time};
    use std::time::Duration;

    impl Event for Login {
        /// Whether it succeeded.
        type Kind = bool;
        #[inline]
        fn kind(&self) -> bool {
            self.ok
        }
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.user)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_millis(self.t_ms))
        }
    }

    type Cx<'a, M> = Scope<'a, Login, M>;

    /// The one monitor instance: its query hands a row per failure taken.
    pub(super) struct Logins {
        pub(super) alerts: Output<Alert>,
    }

    impl Monitor<Login> for Logins {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            // Failures are their own kind of event: successes never reach the query.
            let failed = Pattern::kind(false);
            let query = Query::over(failed)
                .partition_by(|l: &Login| l.user)
                .value(|l: &Login| l.id)
                .window(Window::sliding(Duration::from_millis(WINDOW_MS)))
                .aggregate((Count::default(), Last::of(|id: &u64| *id)));
            cx.query(
                query,
                |m: &mut Self, cx: &mut Cx<'_, Self>, r: &Row<(u64, Option<u64>)>| {
                    // The row comes right after its failure entered: the newest id is its own.
                    if let (n, Some(id)) = r.value {
                        if n <= LIMIT as u64 {
                            return;
                        }
                        // A value not queued is counted (`output_drops` in the status).
                        let _queued = cx.emit_to(&m.alerts, alert(r.key, id, n as usize));
                    }
                },
            )
            // Settings fixed above: an error here is a bug of this file (a panic in `on_load`
            // is counted and fails the run).
            .expect("a valid query");
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Login>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_single(ctx, data, built, |alerts| Logins { alerts })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn r7_9_r7_10_more_than_five_failures_in_5_min_alert_on_the_engine_as_on_the_twin() {
            let w = WINDOW_MS;
            let logins = [
                // User 1: five failures and a success, the sixth failure alerts; one 5 min
                // after the sixth does not (all have left).
                (1, 0, false),
                (1, 1_000, false),
                (1, 2_000, false),
                (1, 3_000, true),
                (1, 4_000, false),
                (1, 5_000, false),
                (1, 6_000, false),
                // User 2: the sixth failure exactly when its first leaves: no alert; user 3's
                // 1 ms before: an alert.
                (2, 10_000, false),
                (3, 10_000, false),
                (2, 20_000, false),
                (3, 20_000, false),
                (2, 30_000, false),
                (3, 30_000, false),
                (2, 40_000, false),
                (3, 40_000, false),
                (2, 50_000, false),
                (3, 50_000, false),
                (1, 6_000 + w, false),
                (3, 10_000 + w - 1, false),
                (2, 10_000 + w, false),
                // User 4: seven failures at one stamp: the sixth and seventh alert.
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
                (4, 10_000 + w, false),
            ];
            let events: Vec<Login> = logins
                .iter()
                .enumerate()
                .map(|(id, &(user, t_ms, ok))| Login {
                    id: id as u64,
                    user,
                    t_ms,
                    ok,
                })
                .collect();
            let (got, want) =
                engine::single_and_twin(events, |alerts| Logins { alerts }, LoginsTwin::default());
            assert_eq!(got, want, "engine vs twin");
            assert_eq!(
                got,
                [
                    alert(1, 6, 6),
                    alert(3, 18, 6),
                    alert(4, 25, 6),
                    alert(4, 26, 7)
                ]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alerts_of(logins: &[(u64, u64, bool)]) -> Vec<Alert> {
        let events: Vec<Login> = logins
            .iter()
            .enumerate()
            .map(|(id, &(user, t_ms, ok))| Login {
                id: id as u64,
                user,
                t_ms,
                ok,
            })
            .collect();
        let data = Data {
            events: events.into(),
            end_ms: 0,
        };
        let mut alerts = data.reference(LoginsTwin::default());
        alerts.sort_unstable();
        alerts
    }

    /// The rule as the module docs state it: for each failure, the user's failures up to it
    /// (in stream order) stamped in `(t - 5 min, t]`.
    fn by_definition(events: &[Login]) -> Vec<Alert> {
        let mut fails: FastMap<u64, Vec<&Login>> = FastMap::default();
        for l in events.iter().filter(|l| !l.ok) {
            fails.entry(l.user).or_default().push(l);
        }
        let mut alerts = Vec::new();
        for (user, f) in fails {
            for (i, l) in f.iter().enumerate() {
                let n = f[..=i]
                    .iter()
                    .filter(|g| g.t_ms + WINDOW_MS > l.t_ms)
                    .count();
                if n > LIMIT {
                    alerts.push(alert(user, l.id, n));
                }
            }
        }
        alerts.sort_unstable();
        alerts
    }

    #[test]
    fn the_twin_is_the_rule_by_definition_on_the_smoke_data_and_every_burst_alerts() {
        let (users, n) = sizes(crate::scenario::Mode::Smoke);
        let (data, bursts) = generate(users, n);
        let mut got = data.reference(LoginsTwin::default());
        got.sort_unstable();
        assert_eq!(got, by_definition(&data.events));
        assert!(bursts >= 10 && got.len() >= bursts, "{} alerts", got.len());
        assert!(
            data.end_ms > 3 * WINDOW_MS,
            "the smoke stream slides its windows"
        );
        assert!(data.events.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    }

    #[test]
    fn count_window_the_sixth_failure_alerts_and_a_failure_5_min_after_it_does_not() {
        let w = WINDOW_MS;
        let got = alerts_of(&[
            // User 1: five failures and a success, then the sixth failure: alert (6).
            (1, 0, false),
            (1, 1_000, false),
            (1, 2_000, false),
            (1, 3_000, true),
            (1, 4_000, false),
            (1, 5_000, false),
            (1, 6_000, false),
            // 5 min after the sixth (and the others): all have left; no alert.
            (1, 6_000 + w, false),
        ]);
        assert_eq!(got, [alert(1, 6, 6)]);
    }

    #[test]
    fn sliding_window_a_failure_leaves_exactly_5_min_after_it_before_a_failure_at_that_stamp() {
        let w = WINDOW_MS;
        let got = alerts_of(&[
            // Users 1 and 2 fail at 0, 10, 20, 30 and 40 s; user 1's sixth failure comes 1 ms
            // before the first one leaves (alert), user 2's exactly when it leaves (no alert:
            // it left first).
            (1, 0, false),
            (2, 0, false),
            (1, 10_000, false),
            (2, 10_000, false),
            (1, 20_000, false),
            (2, 20_000, false),
            (1, 30_000, false),
            (2, 30_000, false),
            (1, 40_000, false),
            (2, 40_000, false),
            (1, w - 1, false),
            (2, w, false),
            // User 1 again at 5 min: its first failure leaves, five stay, this is the sixth.
            (1, w, false),
            // Failures at one stamp count one by one: user 3's sixth alerts, not its fifth.
            (3, w + 7, false),
            (3, w + 7, false),
            (3, w + 7, false),
            (3, w + 7, false),
            (3, w + 7, false),
            (3, w + 7, false),
        ]);
        assert_eq!(got, [alert(1, 10, 6), alert(1, 12, 6), alert(3, 18, 6)]);
    }
}
