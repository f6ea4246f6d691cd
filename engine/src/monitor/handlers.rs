//! Handler plumbing: turns a monitor's typed handlers and hooks (`FnMut(&mut M, &mut Scope, &E)`,
//! `on_load`, `on_die`, a spawn's `init`) into the type-erased ones the context stores
//! ([`Handler`], [`MatchHandler`], [`NewInstance`]), each downcasting the instance's state back to
//! its monitor type.
//!
//! Owns the erasure. May import the leaves, `entry` and `expr`.

use crate::entry::{DieReason, Effects, Handler, MatchHandler, NewInstance};
use crate::event::Event;
use crate::expr::Match;
use crate::state::State;

use super::{Monitor, Scope};

pub(super) fn erase_handler<E, M, F>(mut f: F) -> Handler<E>
where
    E: Event,
    M: 'static,
    F: FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
{
    Box::new(move |state: &mut State, fx: &mut Effects<E>, e: &E| {
        // Invariant: a listener is only ever attached to an instance of the monitor type that
        // registered it, so the downcast cannot fail.
        if let Some(m) = state.downcast_mut::<M>() {
            f(m, &mut Scope::new(fx), e);
        }
    })
}

pub(super) fn erase_match_handler<E, M, F>(mut f: F) -> MatchHandler<E>
where
    E: Event,
    M: 'static,
    F: FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
{
    Box::new(
        move |state: &mut State, fx: &mut Effects<E>, m: &Match<E>| {
            // Invariant: as for `erase_handler`.
            if let Some(s) = state.downcast_mut::<M>() {
                f(s, &mut Scope::new(fx), m);
            }
        },
    )
}

fn on_die_hook<E: Event, M: Monitor<E>>(
    state: &mut State,
    reason: &DieReason,
    fx: &mut Effects<E>,
) {
    if let Some(m) = state.downcast_mut::<M>() {
        m.on_die(reason, &mut Scope::new(fx));
    }
}

/// The first instance of a monitor: its load hook is the initialiser.
pub(crate) fn load_instance<E: Event, M: Monitor<E>>(monitor: M) -> NewInstance<E> {
    NewInstance {
        state: State::new(monitor),
        on_die: Box::new(on_die_hook::<E, M>),
        init: Box::new(|state: &mut State, fx: &mut Effects<E>| {
            if let Some(m) = state.downcast_mut::<M>() {
                m.on_load(&mut Scope::new(fx));
            }
        }),
        deliver: None,
        owner: None,
    }
}

pub(super) fn spawned_instance<E, M, F>(state: M, init: F) -> NewInstance<E>
where
    E: Event,
    M: Monitor<E>,
    F: FnOnce(&mut M, &mut Scope<'_, E, M>) + Send + 'static,
{
    NewInstance {
        state: State::new(state),
        on_die: Box::new(on_die_hook::<E, M>),
        init: Box::new(move |state: &mut State, fx: &mut Effects<E>| {
            if let Some(m) = state.downcast_mut::<M>() {
                init(m, &mut Scope::new(fx));
            }
        }),
        deliver: None,
        owner: None,
    }
}
