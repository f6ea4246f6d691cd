//! SPEC R5.2 and R9.1: overruns are counted and logged through `tracing`. In a file of its own
//! because it installs the process-wide subscriber and counts every line it gets.
mod common;

use common::*;
use correlator::Pattern;

// R5.2, R9.1: every overrun is counted in the status; the log gets the 1st, 2nd, 4th, 8th, ...
// overrun of an inbox, so that a cycle overrunning on every send costs a few lines, not one each.
#[test]
fn r5_2_overruns_are_counted_and_logged_sparingly() {
    let out = Captured::install_global();
    let c = correlator(2);
    let log = Log::default();
    c.load(Script::new("self", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |_: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                if e.val == 0 {
                    let me = cx.context();
                    for i in 1..=40 {
                        cx.send_to(me, ev(1, i)).unwrap();
                    }
                }
            },
        );
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    let overruns = c.shutdown().unwrap().totals.overruns;
    // The entry being processed holds one of the two places, the first send the other: the other 39
    // sends go beyond capacity.
    assert_eq!(overruns, 39);
    let lines = out
        .text()
        .lines()
        .filter(|l| l.contains("inbox taken beyond capacity"))
        .count();
    // Overruns 1, 2, 4, 8, 16 and 32.
    assert_eq!(lines, 6, "{}", out.text());
}
