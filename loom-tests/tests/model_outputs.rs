#![cfg(loom)]
//! Loom models of the output queue's protocols (SPEC R4.3, R8.1).

use loom_tests::output_scenarios;

// R4.3: the receiver's sleep and a Block producer's wait for room lose no wake-up.
#[test]
fn r4_3_output_receiver_sleeps_producer_waits_for_room() {
    loom::model(output_scenarios::receiver_sleeps_producer_waits_for_room);
}

// R4.3: an async producer waiting for room in a full Block output is woken by the receiver's
// take (no lost wake-up).
#[test]
fn r4_3_output_async_producer_is_woken() {
    loom::model(output_scenarios::async_producer_is_woken);
}

// R4.3: an async receiver's waker is woken by a push (no lost wake-up).
#[test]
fn r4_3_output_async_receiver_is_woken() {
    loom::model(output_scenarios::async_receiver_is_woken);
}

// R8.1: the close at shutdown ends a sleeping receiver after what was queued.
#[test]
fn r8_1_output_close_ends_a_sleeping_receiver() {
    loom::model(output_scenarios::close_ends_a_sleeping_receiver);
}

// R8.1: a dropped receiver releases a producer waiting for room.
#[test]
fn r8_1_output_dropped_receiver_releases_producer() {
    loom::model(|| output_scenarios::waiting_producer_is_released(false));
}

// R8.1: the start of shutdown releases a producer waiting for room; its event is kept.
#[test]
fn r8_1_output_drain_releases_producer_and_keeps_its_event() {
    loom::model(|| output_scenarios::waiting_producer_is_released(true));
}
