//! The rtrb adapter: how every scenario that runs rtrb's SPSC `RingBuffer` builds and drives it.
//! The stream's one-producer bound pushes and pops one event at a time ([`Rtrb`], a
//! [`SpinRing`]); the bursts write a whole burst as one chunk and read whatever is there as one
//! ([`write_burst`], [`drain_chunks`], its batch API); the workload twins carry their events over
//! it ([`push_spinning`], [`pop_until_abandoned`]). Every side spins (or yields, sharing a core)
//! while the ring is full or empty, as a user without blocking operations would.
//!
//! May import `kit` and `peers::shape`.

use super::shape::SpinRing;
use crate::scenario::{Ev, Spin};

/// rtrb's `RingBuffer`: `push` and `pop`.
pub struct Rtrb;
impl SpinRing for Rtrb {
    type Tx = rtrb::Producer<Ev>;
    type Rx = rtrb::Consumer<Ev>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev> {
        tx.push(e).map_err(|rtrb::PushError::Full(back)| back)
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<Ev> {
        rx.pop().ok()
    }
    fn abandoned(rx: &Self::Rx) -> bool {
        rx.is_abandoned()
    }
}

/// A ring of `capacity` events of any type (the workload twins carry their own).
pub fn ring<E>(capacity: usize) -> (rtrb::Producer<E>, rtrb::Consumer<E>) {
    rtrb::RingBuffer::<E>::new(capacity)
}

/// Pushes `e`, spinning with `spin` while the ring is full.
#[inline]
pub fn push_spinning<E>(tx: &mut rtrb::Producer<E>, e: E, spin: &mut Spin) {
    let mut e = e;
    loop {
        match tx.push(e) {
            Ok(()) => break,
            Err(rtrb::PushError::Full(back)) => {
                e = back;
                spin.step();
            }
        }
    }
}

/// Pops every event into `f` until the producer is gone and the ring is empty, spinning with
/// `spin` while it is empty.
#[inline]
pub fn pop_until_abandoned<E>(rx: &mut rtrb::Consumer<E>, spin: &mut Spin, mut f: impl FnMut(E)) {
    loop {
        match rx.pop() {
            Ok(e) => f(e),
            // Abandoned and empty: the producer is gone and everything it pushed is taken.
            Err(_) if rx.is_abandoned() && rx.is_empty() => break,
            Err(_) => spin.step(),
        }
    }
}

/// Writes the burst of `b` events numbered from `first` (`ev(seq)` makes each) as one chunk (`b` <= capacity),
/// spinning with `spin` until there is room, as a user would.
#[inline]
pub fn write_burst(
    tx: &mut rtrb::Producer<Ev>,
    first: u64,
    b: usize,
    spin: &mut Spin,
    ev: impl FnMut(u64) -> Ev,
) {
    loop {
        match tx.write_chunk_uninit(b) {
            Ok(chunk) => {
                chunk.fill_from_iter((first..first + b as u64).map(ev));
                return;
            }
            Err(_) => spin.step(),
        }
    }
}

/// Reads whatever is in the ring as one chunk, each event into `f`, until the producer is gone
/// and the ring is empty; spins with `spin` while it is empty.
#[inline]
pub fn drain_chunks(rx: &mut rtrb::Consumer<Ev>, spin: &mut Spin, mut f: impl FnMut(&Ev)) {
    loop {
        let n = rx.slots();
        if n > 0 {
            if let Ok(chunk) = rx.read_chunk(n) {
                let (x, y) = chunk.as_slices();
                for e in x.iter().chain(y) {
                    f(e);
                }
                chunk.commit_all();
            }
        } else if rx.is_abandoned() {
            if rx.is_empty() {
                break;
            }
        } else {
            spin.step();
        }
    }
}
