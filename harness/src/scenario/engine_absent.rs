//! Stand-in for the engine scenarios when the harness is built without its `engine` feature
//! (`--no-default-features`): every engine id is still listed and run, and each reports a failed
//! check saying why, so that a result folder can never pass without the engine having run.

use super::{Family, Outcome, Scenario};

pub(crate) fn absent(id: String, threads: usize) -> Scenario {
    Scenario::new(
        id,
        "engine scenario (harness built without the `engine` feature)",
        threads,
        Family::Engine,
        |_| {
            let mut o = Outcome::default();
            o.fail("the harness was built without the `engine` feature: no engine was measured");
            o
        },
    )
}

/// `route/dispatch`, `route/tree`.
pub fn register_route(v: &mut Vec<Scenario>) {
    v.push(absent("route/dispatch".into(), 1));
    v.push(absent("route/tree".into(), 1));
}
/// `listeners/indexed`.
pub fn register_listeners(v: &mut Vec<Scenario>) {
    v.push(absent("listeners/indexed".into(), 1));
}
/// `pingpong/engine`, `pingpong/engine-park`.
pub fn register_pingpong(v: &mut Vec<Scenario>) {
    v.push(absent("pingpong/engine".into(), 2));
    v.push(absent("pingpong/engine-park".into(), 2));
}
/// `stream/{n}to1/engine`.
pub fn register_stream(v: &mut Vec<Scenario>, n: usize) {
    v.push(absent(format!("stream/{n}to1/engine"), n + 1));
}
/// `record/stream/{n}to1`.
pub fn register_stream_recorded(v: &mut Vec<Scenario>, n: usize) {
    v.push(absent(format!("record/stream/{n}to1"), n + 1));
}
/// `stream/1to1/engine-batch`.
pub fn register_stream_batch(v: &mut Vec<Scenario>) {
    v.push(absent("stream/1to1/engine-batch".into(), 2));
}
/// `fanout/channel`.
pub fn register_fanout(v: &mut Vec<Scenario>, _cores: usize) {
    v.push(absent("fanout/channel".into(), 3));
}
/// `pipeline/{k}`.
pub fn register_pipeline(v: &mut Vec<Scenario>, k: usize) {
    v.push(absent(format!("pipeline/{k}"), k + 1));
}
/// `openloop/rate`.
pub fn register_openloop(v: &mut Vec<Scenario>) {
    v.push(absent("openloop/rate".into(), 2));
}
/// `idle/wakeup`.
pub fn register_idle(v: &mut Vec<Scenario>) {
    v.push(absent("idle/wakeup".into(), 1));
}
/// `backpressure/flood`.
pub fn register_backpressure(v: &mut Vec<Scenario>) {
    v.push(absent("backpressure/flood".into(), 3));
}
/// `alloc/{route,send,send-batch,channel,output}`.
pub fn register_alloc(v: &mut Vec<Scenario>) {
    for p in ["route", "send", "send-batch", "channel", "output"] {
        v.push(absent(format!("alloc/{p}"), 2));
    }
}

/// `burst/{B}/engine`.
pub fn register_burst(v: &mut Vec<Scenario>) {
    for b in crate::scenario::burst::BURSTS {
        v.push(absent(format!("burst/{b}/engine"), 2));
    }
}
