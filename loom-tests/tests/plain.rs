#![cfg(not(loom))]
//! The loom scenarios on real threads, many times each, so that `cargo test --workspace` runs them
//! without `--cfg loom` too. Real threads explore far fewer interleavings than loom; these runs catch
//! gross breakage and hangs (a hang here is a lost wake-up or a missed deadlock avoidance).

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use loom_tests::scenarios;

/// Iterations per scenario.
const RUNS: usize = if cfg!(miri) { 5 } else { 300 };

/// A run of one scenario that takes longer than this is a hang (it takes well under a second).
const HANG: Duration = Duration::from_secs(120);

/// Runs `f` `RUNS` times; aborts the whole process (so that CI fails instead of hanging) if it does
/// not finish within `HANG`: a hang is a lost wake-up, a missed deadlock avoidance, or a scenario
/// thread that panicked while the main thread waits for it.
fn repeat(name: &'static str, f: fn()) {
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(HANG) {
            eprintln!("scenario {name} hung for {HANG:?}: aborting");
            std::process::abort();
        }
    });
    for _ in 0..RUNS {
        f();
    }
    drop(done);
    watchdog.join().unwrap();
}

// R2.3
#[test]
fn r2_3_two_producers_fifo_no_loss_no_duplicate() {
    repeat("two_producers_fifo", scenarios::two_producers_fifo);
}

// R2.3 with the look-ahead
#[test]
fn r2_3_look_ahead_sees_what_it_takes() {
    repeat(
        "look_ahead_sees_what_it_takes",
        scenarios::look_ahead_sees_what_it_takes,
    );
}

// R1.3
#[test]
fn r1_3_consumer_parking_no_lost_wakeup() {
    repeat(
        "consumer_parks_no_lost_wakeup",
        scenarios::consumer_parks_no_lost_wakeup,
    );
}

// R1.3
#[test]
fn r1_3_two_producers_wake_sleeping_consumer() {
    repeat(
        "two_producers_wake_sleeping_consumer",
        scenarios::two_producers_wake_sleeping_consumer,
    );
}

// R5.1
#[test]
fn r5_1_blocked_producer_resumes() {
    repeat(
        "blocked_producer_resumes",
        scenarios::blocked_producer_resumes,
    );
}

// R5.1
#[test]
fn r5_1_batched_release_producer_resumes() {
    repeat(
        "batched_release_producer_resumes",
        scenarios::batched_release_producer_resumes,
    );
}

#[test]
fn r5_1_two_blocked_producers_resume() {
    repeat(
        "two_blocked_producers_resume",
        scenarios::two_blocked_producers_resume,
    );
}

// R5.2
#[test]
fn r5_2_two_contexts_full_inboxes_finish() {
    repeat(
        "two_contexts_full_inboxes_finish",
        scenarios::two_contexts_full_inboxes_finish,
    );
}

// R5.2
#[test]
fn r5_2_self_send_into_full_inbox_finishes() {
    repeat(
        "self_send_into_full_inbox_finishes",
        scenarios::self_send_into_full_inbox_finishes,
    );
}

// R2.2, R3.2
#[test]
fn r2_2_entry_waits_for_route_stack() {
    repeat(
        "entry_waits_for_route_stack",
        scenarios::entry_waits_for_route_stack,
    );
}

// R8.1
#[test]
fn r8_1_shutdown_races_send() {
    repeat("shutdown_races_send", scenarios::shutdown_races_send);
}

// All-or-nothing sends.
#[test]
fn cancel_races_consumer_no_phantom_no_hang() {
    repeat("cancel_races_consumer", scenarios::cancel_races_consumer);
}

// R5.2 / R1.3
#[test]
fn r5_2_overflow_reservation_wakes_sleeping_consumer() {
    repeat(
        "overflow_reservation_wakes_sleeping_consumer",
        scenarios::overflow_reservation_wakes_sleeping_consumer,
    );
}

// R2.3
#[test]
fn r2_3_batch_wraps_around_ring_fifo() {
    repeat(
        "batch_wraps_around_ring_fifo",
        scenarios::batch_wraps_around_ring_fifo,
    );
}

// R5.1
#[test]
fn r5_1_batch_meets_full_inbox_waits_whole() {
    repeat(
        "batch_meets_full_inbox_waits_whole",
        scenarios::batch_meets_full_inbox_waits_whole,
    );
}

// R8.1
#[test]
fn r8_1_batch_races_close() {
    repeat("batch_races_close", scenarios::batch_races_close);
}

// R4.3
#[test]
fn r4_3_output_receiver_sleeps_producer_waits_for_room() {
    repeat(
        "output_receiver_sleeps_producer_waits_for_room",
        loom_tests::output_scenarios::receiver_sleeps_producer_waits_for_room,
    );
}

// R4.3
#[test]
fn r4_3_output_async_receiver_is_woken() {
    repeat(
        "output_async_receiver_is_woken",
        loom_tests::output_scenarios::async_receiver_is_woken,
    );
}

// R8.1
#[test]
fn r8_1_output_close_ends_a_sleeping_receiver() {
    repeat(
        "output_close_ends_a_sleeping_receiver",
        loom_tests::output_scenarios::close_ends_a_sleeping_receiver,
    );
}

// R8.1
#[test]
fn r8_1_output_waiting_producer_is_released() {
    repeat("output_waiting_producer_is_released", || {
        loom_tests::output_scenarios::waiting_producer_is_released(false);
        loom_tests::output_scenarios::waiting_producer_is_released(true);
    });
}

#[test]
fn r5_1_async_sender_is_woken() {
    repeat(
        "async_sender_is_woken",
        loom_tests::async_scenarios::async_sender_is_woken,
    );
}

#[test]
fn r5_1_cancelled_async_send_leaves_nothing() {
    repeat(
        "cancelled_async_send_leaves_nothing",
        loom_tests::async_scenarios::cancelled_async_send_leaves_nothing,
    );
}

#[test]
fn r8_1_close_ends_a_waiting_async_send() {
    repeat(
        "close_ends_a_waiting_async_send",
        loom_tests::async_scenarios::close_ends_a_waiting_async_send,
    );
}

#[test]
fn r5_1_async_send_races_free() {
    repeat(
        "async_send_races_free",
        loom_tests::async_scenarios::async_send_races_free,
    );
}
