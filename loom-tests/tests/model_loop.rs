#![cfg(loom)]
//! Loom models of the context loop: route stack, shutdown, cancelled reservations (SPEC R2.2, R3.2,
//! R8.1).

use loom_tests::scenarios;

// R2.2, R3.2: an entry pushed while the consumer drains its route stack is taken only once the stack
// is empty.
#[test]
fn r2_2_entry_waits_for_route_stack() {
    loom::model(scenarios::entry_waits_for_route_stack);
}

// R8.1: shutdown racing a send: every accepted entry is processed, a refused send gets Closed.
#[test]
fn r8_1_shutdown_races_send() {
    loom::model(scenarios::shutdown_races_send);
}

// All-or-nothing sends: a cancelled reservation racing the consumer is never taken and never hangs it.
#[test]
fn cancel_races_consumer_no_phantom_no_hang() {
    loom::model(scenarios::cancel_races_consumer);
}
