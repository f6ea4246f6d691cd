#![cfg(loom)]
//! Loom models of back-pressure and deadlock avoidance (SPEC R5.1, R5.2).

use loom_tests::scenarios;

// R5.1: a producer blocked on a full inbox resumes once the consumer takes and releases an entry.
#[test]
fn r5_1_blocked_producer_resumes() {
    loom::model(scenarios::blocked_producer_resumes);
}

// R5.1: with places freed in batches, a parked producer resumes and the consumer can still sleep.
#[test]
fn r5_1_batched_release_producer_resumes() {
    loom::model(scenarios::batched_release_producer_resumes);
}

// R5.1: two producers parked on one full inbox both resume.
#[test]
fn r5_1_two_blocked_producers_resume() {
    loom::model(scenarios::two_blocked_producers_resume);
}

// R5.2: two contexts sending to each other's full inbox both finish; nothing lost or reordered,
// overflow included.
#[test]
fn r5_2_two_contexts_full_inboxes_finish() {
    loom::model(scenarios::two_contexts_full_inboxes_finish);
}

// R5.2: a self-send into a full inbox finishes (the shortest cycle).
#[test]
fn r5_2_self_send_into_full_inbox_finishes() {
    loom::model(scenarios::self_send_into_full_inbox_finishes);
}

// R5.2 / R1.3: an overflow reservation racing the consumer's sleep neither loses the entry nor
// its wake-up.
#[test]
fn r5_2_overflow_reservation_wakes_sleeping_consumer() {
    loom::model(scenarios::overflow_reservation_wakes_sleeping_consumer);
}

// R5.1: an all-or-nothing batch meets a full inbox, waits for room for all of it, and resumes.
#[test]
fn r5_1_batch_meets_full_inbox_waits_whole() {
    loom::model(scenarios::batch_meets_full_inbox_waits_whole);
}

// R8.1: a batch racing shutdown is accepted whole or refused whole; what was accepted is processed.
#[test]
fn r8_1_batch_races_close() {
    loom::model(scenarios::batch_races_close);
}
