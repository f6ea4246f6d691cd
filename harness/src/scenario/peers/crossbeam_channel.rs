//! The crossbeam-channel adapter: how every scenario that runs crossbeam-channel builds and drives it,
//! `bounded(capacity)`, the blocking `send` and `recv` ([`Crossbeam`]): the stream and ping-pong peers, `burst/{B}/crossbeam-channel`, `route/crossbeam-channel` and the self-test all drive it through this adapter.
//!
//! May import `kit` and `peers::shape`.

use super::shape::blocking_channel;
use crate::scenario::Ev;

blocking_channel!(
    /// `crossbeam_channel::bounded`.
    Crossbeam,
    crossbeam_channel::Sender<Ev>,
    crossbeam_channel::Receiver<Ev>,
    crossbeam_channel::bounded
);
