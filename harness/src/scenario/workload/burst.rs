//! `workload/burst`, `workload/burst/twin`: bursts of failed logins per user, a counted repetition
//! that skips past each match (issue 33, item 3).
//!
//! # The rule (the same on both sides)
//! Alert when a user fails [`BURST`] logins within [`WINDOW_MS`] of the first, once per burst: the
//! bursts do not overlap. The engine, one instance per user (`load_per_key`):
//! `when_all(fail.times(5).within_from_first(60 s).after_match(SkipPastLastEvent))`, `fail` the
//! user's failed logins. `when_all` starts a fresh match at every failure; each match runs its
//! own bound from its first failure, exclusive (under event time a timer due at or before an
//! event's stamp fires before that event), and completes at its fifth failure; when one
//! completes, `SkipPastLastEvent` discards every other match in progress, so the next match
//! starts at the next failure after it. An alert is `(3, user, first failure's id, fifth's id)`.
//! By hand, over a user's failures `f0, f1, ...`: `s = 0`; while `f[s+4]` exists, if
//! `t(f[s+4]) < t(f[s]) + 60 s` alert `(f[s], f[s+4])` and `s += 5`, else `s += 1` (the match
//! started at `f[s]` expired when the clock reached `t(f[s]) + 60 s`, and the one started at
//! `f[s+1]` is now the oldest). The twin runs it as the failures arrive: per user, the (at most
//! four) failures of the oldest matches still open, oldest first.
//!
//! # The data
//! Seeded: `users` sparse user ids; background logins pick a user uniformly, time moves 0-2 ms per
//! login, 5 % of them fail (a user sees about one login a minute and a half: five failures within
//! a minute are rare). `ATTACKED_ONE_IN` users are attacked: one to three bursts each, at a
//! seeded time, of 3 to 14 failures 0.2 to 9 s apart (some too short, some too slow, some long
//! enough for two alerts). Sorted by time (stable), then numbered.

use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin};
use crate::scenario::{Outcome, RunCtx, Scenario};

/// Failures that make a burst.
pub const BURST: u32 = 5;
/// The window from a burst's first failure (exclusive), ms.
pub const WINDOW_MS: u64 = 60_000;
/// One user in this many is attacked.
const ATTACKED_ONE_IN: u64 = 100;
/// The generator's seed.
const SEED: u64 = 0xb0a5_7ed1;

/// `(users, background logins)` per mode (the attacks add about 1.7 %).
fn sizes(mode: crate::scenario::Mode) -> (u64, u64) {
    mode.pick((2_000, 20_000), (100_000, 1_000_000), (100_000, 1_000_000))
}

/// A login.
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

/// The stream: `n` background logins over `users` users, and the attacks.
fn generate(users: u64, n: u64) -> Data<Login> {
    let mut rng = Rng::new(SEED);
    let keys: Vec<u64> = (0..users).map(|i| mix(i ^ SEED)).collect();
    let mut t = 0;
    let mut events: Vec<Login> = (0..n)
        .map(|_| {
            t += rng.below(3);
            Login {
                id: 0,
                user: keys[rng.below(users) as usize],
                t_ms: t,
                ok: !rng.chance(50),
            }
        })
        .collect();
    let end = t;
    for (j, &user) in keys.iter().enumerate() {
        if j as u64 % ATTACKED_ONE_IN != ATTACKED_ONE_IN / 2 {
            continue;
        }
        for _ in 0..rng.range(1, 3) {
            let mut at = rng.below(end.max(1));
            for _ in 0..rng.range(3, 14) {
                events.push(Login {
                    id: 0,
                    user,
                    t_ms: at.min(end),
                    ok: false,
                });
                at += rng.range(200, 9_000);
            }
        }
    }
    events.sort_by_key(|l| l.t_ms);
    for (id, l) in events.iter_mut().enumerate() {
        l.id = id as u64;
    }
    Data {
        events: events.into(),
        end_ms: end,
    }
}

/// One user's matches still open in the twin: the `(time, id)` of each failure that started one,
/// oldest first; the newest failures of a user, fewer than [`BURST`].
#[derive(Clone, Copy, Default)]
struct Open {
    starts: [(u64, u64); BURST as usize - 1],
    len: u8,
}

/// The rule by hand: a map from user to its open matches.
#[derive(Default)]
struct BurstTwin {
    users: FastMap<u64, Open>,
}

impl Twin<Login> for BurstTwin {
    #[inline]
    fn step(&mut self, l: &Login, alerts: &mut Vec<Alert>) {
        if l.ok {
            return;
        }
        let open = self.users.entry(l.user).or_default();
        let len = usize::from(open.len);
        // The matches whose bound the clock has reached by this failure expired first.
        let expired = open.starts[..len]
            .iter()
            .take_while(|&&(t, _)| t + WINDOW_MS <= l.t_ms)
            .count();
        open.starts.copy_within(expired..len, 0);
        let len = len - expired;
        if len == BURST as usize - 1 {
            // The oldest open match completes; the others are discarded.
            alerts.push(Alert {
                rule: 3,
                key: l.user,
                first: open.starts[0].1,
                last: l.id,
            });
            open.len = 0;
        } else {
            open.starts[len] = (l.t_ms, l.id);
            open.len = len as u8 + 1;
        }
    }

    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<Alert>) {}
}

/// Registers `workload/burst` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("workload/burst".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/burst",
        "5 failed logins within 60 s of the first, once per burst, when_all(fail.times(5).within_from_first(60 s).after_match(SkipPastLastEvent)) per user (load_per_key), event time, one context: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/burst/twin",
        "workload/burst by hand: a FastMap<user, failures of the open matches (at most 4)> in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Login>>) -> Outcome {
    let mut out = Outcome::default();
    let (users, n) = sizes(ctx.mode);
    out.param("users", users);
    let data = generate(users, n);
    measure(
        &mut out,
        ctx,
        &data,
        BurstTwin::default,
        engine,
        Expect::Some,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as the module docs state it, over each user's whole list of failures.
    fn by_definition(events: &[Login]) -> Vec<Alert> {
        let mut fails: FastMap<u64, Vec<&Login>> = FastMap::default();
        for l in events.iter().filter(|l| !l.ok) {
            fails.entry(l.user).or_default().push(l);
        }
        let mut alerts = Vec::new();
        let k = BURST as usize - 1;
        for (user, f) in fails {
            let mut s = 0;
            while s + k < f.len() {
                if f[s + k].t_ms < f[s].t_ms + WINDOW_MS {
                    alerts.push(Alert {
                        rule: 3,
                        key: user,
                        first: f[s].id,
                        last: f[s + k].id,
                    });
                    s += k + 1;
                } else {
                    s += 1;
                }
            }
        }
        alerts.sort_unstable();
        alerts
    }

    #[test]
    fn the_twin_is_the_rule_over_each_users_failures_and_the_data_has_bursts() {
        let (users, n) = sizes(crate::scenario::Mode::Smoke);
        let data = generate(users, n);
        let mut got = data.reference(BurstTwin::default());
        got.sort_unstable();
        let want = by_definition(&data.events);
        assert_eq!(got, want);
        assert!(
            want.len() > 5 && want.len() < 1_000,
            "{} alerts",
            want.len()
        );
        assert!(data.events.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    }
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use correlator::{AfterMatch, Event, Match, Monitor, Output, Pattern, Scope, Time};
    use std::time::Duration;

    impl Event for Login {
        type Kind = ();
        #[inline]
        fn kind(&self) {}
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

    /// One user's instance.
    struct User {
        user: u64,
        /// The user's first login, handed to the factory (routed from `on_load`).
        first: Option<Login>,
        alerts: Output<Alert>,
    }

    impl Monitor<Login> for User {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            let fail = Pattern::kind(()).key(self.user).filter(|l: &Login| !l.ok);
            let burst = fail
                .times(BURST)
                .within_from_first(Duration::from_millis(WINDOW_MS))
                .after_match(AfterMatch::SkipPastLastEvent);
            cx.when_all(
                burst,
                |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Login>| {
                    let (Some(first), Some(last)) = (hit.events.first(), hit.events.last()) else {
                        return;
                    };
                    let a = Alert {
                        rule: 3,
                        key: m.user,
                        first: first.id,
                        last: last.id,
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

    /// The instance of `user`, made from its first login (routed from `on_load`).
    fn factory(user: u64, first: &Login, alerts: Output<Alert>) -> User {
        User {
            user,
            first: Some(*first),
            alerts,
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Login>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_keyed(ctx, data, built, [()], factory)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn r7_6_five_failures_within_the_window_fire_once_and_the_next_burst_starts_after() {
            let w = WINDOW_MS;
            let logins = [
                // User 1: a success, then six failures inside a minute, then four more: the
                // first five fire (ids 1-5); the sixth starts the next match, which reaches
                // five at the tenth failure (id 14), inside its own minute.
                (1, 0, true),
                (1, 1, false),
                (1, 2, false),
                (1, 3, false),
                (1, 4, false),
                (1, 5, false),
                (1, 6, false),
                // User 2: its fifth failure is stamped exactly at the first's bound: too late;
                // the match started at its second failure completes at its sixth.
                (2, 10, false),
                (2, 20, false),
                (2, 30, false),
                (2, 40, false),
                (1, 50, false),
                (1, 51, false),
                (1, 52, false),
                (1, 53, false),
                (2, 10 + w, false),
                (2, 10 + w + 1, false),
                // User 3: four failures only, and a success.
                (3, 2 * w, false),
                (3, 2 * w, false),
                (3, 2 * w, true),
                (3, 2 * w + 1, false),
                (3, 2 * w + 2, false),
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
            let end = 3 * w;
            let (got, want) =
                engine::engine_and_twin(events, end, [()], factory, BurstTwin::default());
            assert_eq!(got, want, "engine vs twin");
            let alert = |key, first, last| Alert {
                rule: 3,
                key,
                first,
                last,
            };
            assert_eq!(got, [alert(1, 1, 5), alert(1, 6, 14), alert(2, 8, 16)]);
        }
    }
}
