//! The correlator's benchmark lab (`harness/BENCHMARKS.md` is its user-facing document: peers,
//! fairness, targets, result format).
//!
//! # Design
//! The binary is a *parent* that never measures and *children* that do. `harness run` resolves a
//! pinning plan from the core list it reads once ([`pin`]), captures the machine ([`mod@env`]), and
//! re-executes itself once per run of every scenario (`run-one`, [`runner`]), so that allocator,
//! thread and cache state never carry over from one run to the next. Each child runs one
//! scenario from the catalogue ([`catalogue`], over the [`scenario`] families): a warm-up window that is discarded, a timed
//! window, and the scenario's own checks (counts, per-sender FIFO order, checksums), then prints
//! one JSON [`record::RunRecord`]. The parent aggregates runs ([`stats`]: median/min/max over
//! runs, HdrHistograms merged over threads and runs), evaluates the targets on paired per-round
//! ratios with bootstrap intervals ([`targets`]), repeats the undecided ones within a time
//! budget, writes the result folder ([`output`]: `env.json`, `summary.json`, `summary.csv`,
//! `.hgrm`, [`plots`], [`report`]) and exits non-zero when any check failed (a target that is
//! NOT MET is reported, not an error). [`compare`] diffs two folders, absolute figures with a
//! Mann–Whitney test over the runs and target ratios with one over the per-round ratios, and exits non-zero when a
//! target regressed.
//!
//! Engine scenarios and their peers (crossbeam-channel, std mpsc, kanal, flume, tokio mpsc,
//! the disruptor crate, rtrb, crossbeam-queue's `ArrayQueue`, a bare cache-line ping-pong,
//! see [`scenario::peers`]) run in the same `harness run`, on the same thread
//! slots and cores, with the same event type and capacities; every headline in `report.md` is a
//! ratio between them.
//!
//! The global allocator of the binary is mimalloc behind a counting wrapper ([`alloc`]); the
//! `alloc/*` scenarios read the counter around a steady-state window.

#![warn(missing_docs)]

pub mod alloc;
pub mod catalogue;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod env;
pub mod output;
pub mod pin;
pub mod plots;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod targets;
