//! The crossbeam-queue adapter: `ArrayQueue::new(capacity)` on a shared `Arc`, `push` and `pop`
//! ([`Array`], a [`SpinRing`]: no blocking operations, both sides spin), as the
//! `stream/1to1/arrayqueue` baseline drives it.
//!
//! May import `kit` and `peers::shape`.

use super::shape::SpinRing;
use crate::scenario::Ev;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// crossbeam-queue's `ArrayQueue`: `push` and `pop` on a shared `Arc`.
pub struct Array;
impl SpinRing for Array {
    type Tx = Arc<ArrayQueue<Ev>>;
    type Rx = Arc<ArrayQueue<Ev>>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev> {
        tx.push(e)
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<Ev> {
        rx.pop()
    }
    fn abandoned(rx: &Self::Rx) -> bool {
        Arc::strong_count(rx) == 1
    }
}
