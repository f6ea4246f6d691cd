//! Hardening (issue 15): user code outside handlers, deep spawn chains, memory kept after peaks,
//! builder limits and foreign context references. Each test names the SPEC rule it checks.
//!
//! A test whose failure used to abort the whole process (a stack overflow, an allocation failure)
//! runs its scenario in a child process (this test binary, filtered to that test), so that an
//! abort fails the test instead of killing the test binary.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use correlator::{Correlator, Error, Event};

/// A test event: a kind and a value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    kind: u32,
    val: u64,
}

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

/// Set in the environment of a child process that runs one test's scenario.
const CHILD: &str = "HARDENING_ROBUST_CHILD";

/// Runs `scenario` in a child process (this binary, filtered to the test `name`), so that an abort
/// fails the test rather than the whole test binary; in the child, runs it directly. The child gets
/// 120 s before it is killed and the test fails.
fn in_child_process(name: &str, scenario: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        scenario();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child test process");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: the child process did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("the child's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success() && stdout.contains("1 passed"),
        "{name} failed in its child process ({status}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// Item 13: builder limits.

// R8.2: every value of a size limit gives a correlator or a typed error: never a panic in the
// user's thread, never an abort on allocation (several of these used to do one or the other).
#[test]
fn r8_2_builder_limits_of_any_size_are_typed_errors() {
    in_child_process("r8_2_builder_limits_of_any_size_are_typed_errors", || {
        let build = |b: correlator::CorrelatorBuilder<Ev>| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.external_time().build()))
                .expect("build must not panic")
        };
        for max in [usize::MAX, 1 << 32, u32::MAX as usize + 1, 1 << 20] {
            let e = build(Correlator::builder().max_contexts(max))
                .err()
                .expect("too many contexts is refused");
            assert!(
                matches!(e, Error::LimitTooLarge { setting: "max_contexts", requested, .. } if requested == max),
                "{e:?}"
            );
            assert!(e.to_string().contains("max_contexts"), "{e}");
        }
        for max in [usize::MAX, 1 << 32, 1 << 20] {
            let e = build(Correlator::builder().max_channels(max))
                .err()
                .expect("too many channels is refused");
            assert!(
                matches!(e, Error::LimitTooLarge { setting: "max_channels", requested, .. } if requested == max),
                "{e:?}"
            );
        }
        // Within the documented maximum, but more memory than any machine this runs on has.
        for capacity in [1usize << 36, 1 << 40] {
            let e = build(Correlator::builder().inbox_capacity(capacity))
                .err()
                .expect("an inbox that cannot be allocated is refused");
            assert!(
                matches!(e, Error::AllocationFailed { .. }),
                "{capacity}: {e:?}"
            );
            assert!(e.to_string().contains("inbox_capacity"), "{e}");
        }
        let e = build(Correlator::builder().inbox_capacity(usize::MAX))
            .err()
            .expect("refused");
        assert!(matches!(e, Error::InvalidCapacity { .. }), "{e:?}");
        // The largest accepted limits still build.
        let c = build(
            Correlator::builder()
                .max_contexts(correlator::MAX_CONTEXTS)
                .max_channels(correlator::MAX_CHANNELS),
        )
        .expect("the maxima are accepted");
        c.shutdown().expect("clean shutdown");
    });
}
