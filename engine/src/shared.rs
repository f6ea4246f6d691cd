//! The registry as the engine instantiates it: [`Shared`] and [`ContextShared`] with inboxes of
//! [`Entry`].
//!
//! `registry` defines its structures generic over the inbox item so that it need not name
//! `Entry` (an entry can carry a handler's initialiser, which sends through links that hold the
//! registry: a circle of types). This module sits above both and names the one instantiation
//! every sender, context and the facade use.
//!
//! May import `entry` and `registry`.

use crate::entry::Entry;
use crate::registry;

/// What every thread knows about a correlator whose events are `E` (see [`registry::Registry`]).
pub(crate) type Shared<E> = registry::Registry<E, Entry<E>>;

/// What other threads know about a context of a correlator whose events are `E` (see
/// [`registry::ContextShared`]).
pub(crate) type ContextShared<E> = registry::ContextShared<Entry<E>>;
