#![cfg(loom)]
//! Loom models of the ring and the sleep/wake protocol (SPEC R2.3, R1.3).

use loom_tests::scenarios;

// R2.3: two producers and the consumer: per-producer FIFO, no loss, no duplicate.
#[test]
fn r2_3_two_producers_fifo_no_loss_no_duplicate() {
    loom::model(scenarios::two_producers_fifo);
}

// R1.3: the consumer parks while a producer pushes: no lost wake-up (loom reports a deadlock if the
// consumer parks forever).
#[test]
fn r1_3_consumer_parking_no_lost_wakeup() {
    loom::model(scenarios::consumer_parks_no_lost_wakeup);
}

// R1.3: two producers racing to wake one sleeping consumer.
#[test]
fn r1_3_two_producers_wake_sleeping_consumer() {
    loom::model(scenarios::two_producers_wake_sleeping_consumer);
}

// R2.3: a batch reservation that wraps around the ring, racing a single send: per-producer FIFO,
// no loss, no duplicate, no lost wake-up.
#[test]
fn r2_3_batch_wraps_around_ring_fifo() {
    loom::model(scenarios::batch_wraps_around_ring_fifo);
}

// R2.3 with the look-ahead: peeking at the entries behind the one taken, racing a producer that
// wraps the ring, sees only published entries of this lap, and loses nothing.
#[test]
fn r2_3_look_ahead_sees_what_it_takes() {
    loom::model(scenarios::look_ahead_sees_what_it_takes);
}
