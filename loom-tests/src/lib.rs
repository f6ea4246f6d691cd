//! Loom models of the engine protocols live in `tests/`.
