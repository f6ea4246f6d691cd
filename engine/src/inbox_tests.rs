//! Unit tests of the inbox (also run under miri by the README's test command).

use super::*;

// R2.3: one sender's entries come out in the order they went in.
#[test]
fn r2_3_single_sender_fifo() {
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    for round in 0..10 {
        for i in 0..4 {
            let r = inbox.try_reserve(Sender::External).expect("room");
            inbox.commit(r, round * 4 + i);
        }
        assert_eq!(
            inbox.try_reserve(Sender::External).unwrap_err(),
            Refusal::Full
        );
        for i in 0..4 {
            assert_eq!(consumer.pop(), Some(round * 4 + i));
            consumer.release(1);
        }
        assert_eq!(consumer.pop(), None);
    }
}
