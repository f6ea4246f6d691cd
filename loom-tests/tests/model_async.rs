#![cfg(loom)]
//! Loom models of async senders in the inbox's room-waiter protocol (SPEC R5.1, R8.1).

use loom_tests::async_scenarios;

// R5.1: an async sender meets a full inbox, registers its waker, and is woken when the consumer
// frees a place; its event arrives, in order (no lost wake-up).
#[test]
fn r5_1_async_sender_is_woken() {
    loom::model(async_scenarios::async_sender_is_woken);
}

// R5.1: a registered async send dropped while the consumer frees: nothing hangs, nothing is lost
// or duplicated, the waiter list is empty, and the next send gets in.
#[test]
fn r5_1_cancelled_async_send_leaves_nothing() {
    loom::model(async_scenarios::cancelled_async_send_leaves_nothing);
}

// R8.1: closing external input wakes an async sender waiting for room: it gets `Closed`.
#[test]
fn r8_1_close_ends_a_waiting_async_send() {
    loom::model(async_scenarios::close_ends_a_waiting_async_send);
}

// R5.1: an async sender's registration races the consumer's free in every order: no lost wake-up
// (the re-check after announcing).
#[test]
fn r5_1_async_send_races_free() {
    loom::model(async_scenarios::async_send_races_free);
}
