//! `record/*`: what recording costs (issue 35, SPEC §10). A record scenario is an engine scenario
//! (`record/stream/1to1` is `stream/1to1/engine`, `record/workload/fraud` is `workload/fraud`)
//! run by the same code with its correlator built with
//! `record_to(FileSink::create(path))`, `path` a fresh file in the temporary directory; the
//! report pairs it with the plain scenario of the same round (`crate::targets`, `RECORD_RATIO`).
//!
//! A recording that wrote nothing would look free: after the run the file is read back
//! (`Recording::open`) and the run fails unless its contexts' streams hold at least as many inbox
//! entries as the scenario sent events. The file is deleted when the [`Journal`] is dropped, after
//! the check.

use crate::scenario::{Outcome, RunCtx};
use correlator::record::{FileSink, Recording};
use correlator::{Correlator, CorrelatorBuilder, Event, PinningPlan};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether a scenario's correlator records its run, and where to.
#[derive(Debug)]
pub(crate) enum Journal {
    /// No recording: the engine's default.
    Off,
    /// To a file of its own, deleted when the journal is dropped.
    Record(PathBuf),
}

impl Journal {
    /// No recording, for a default that outlives any run (a `'static` reference: `Journal` has a
    /// `Drop`, so `&Journal::Off` is not promoted to one).
    pub(crate) const OFF: &'static Journal = &Journal::Off;

    /// A recording to a fresh file in the temporary directory, named after `tag`, the process
    /// and a counter (a run is one process; the counter keeps two journals of a test apart).
    pub(crate) fn record(tag: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "harness-{}-{}-{n}.recording",
            tag.replace('/', "-"),
            std::process::id()
        );
        Journal::Record(std::env::temp_dir().join(name))
    }

    /// Builds `b`'s correlator for a scenario: its contexts pinned to the plan's slots in order
    /// (when the plan pins), recording to this journal.
    pub(crate) fn build<E: Event>(
        &self,
        ctx: &RunCtx,
        mut b: CorrelatorBuilder<E>,
    ) -> Result<Correlator<E>, String> {
        if ctx.map.pinned {
            b = b.pinning(PinningPlan::cores(ctx.map.cores.clone()));
        }
        self.apply(b)?
            .build()
            .map_err(|e| format!("engine build failed: {e}"))
    }

    /// `b`, recording to the journal's file when it has one (creating the file).
    fn apply<E: Event>(&self, b: CorrelatorBuilder<E>) -> Result<CorrelatorBuilder<E>, String> {
        match self {
            Journal::Off => Ok(b),
            Journal::Record(path) => {
                let sink = FileSink::create(path)
                    .map_err(|e| format!("recording file {}: {e}", path.display()))?;
                Ok(b.record_to(sink))
            }
        }
    }

    /// After the run (the correlator shut down, so the file is complete): reads the recording
    /// back and fails `out` unless its streams hold at least `sent` inbox entries in all. Records
    /// the entries and the file's size as parameters. Nothing to check when off.
    pub(crate) fn verify(&self, out: &mut Outcome, sent: u64) {
        let Journal::Record(path) = self else {
            return;
        };
        if !out.failures.is_empty() {
            // The run already failed, and says why: a recording cut short by it would only add
            // a second, misleading failure.
            return;
        }
        if let Ok(meta) = std::fs::metadata(path) {
            out.param("recording_bytes", meta.len());
        }
        let recording = match Recording::open(path) {
            Ok(r) => r,
            Err(e) => {
                out.fail(format!(
                    "the recording {} is unreadable: {e}",
                    path.display()
                ));
                return;
            }
        };
        let entries: u64 = recording
            .summary()
            .contexts
            .iter()
            .flat_map(|c| c.entries_by_origin.values())
            .sum();
        out.param("recorded_entries", entries);
        out.check(entries >= sent, || {
            format!("the recording holds {entries} inbox entries for {sent} events sent")
        });
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Journal::Record(path) = self {
            // Absent when the run failed before the file was created.
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Ev;
    use correlator::Correlator;

    // R10.1: what a context took is in the recording; the check fails a recording that holds
    // fewer entries than were sent, and the file is gone once the journal is dropped.
    #[test]
    fn r10_1_verify_counts_the_recorded_entries_and_the_file_goes_with_the_journal() {
        let journal = Journal::record("test/verify");
        let Journal::Record(path) = &journal else {
            unreachable!("a recording journal")
        };
        let path = path.clone();
        let b = journal
            .apply(Correlator::<Ev>::builder().external_time())
            .expect("the file is created");
        let c = b.build().expect("build");
        c.start();
        let input = c.input();
        for seq in 0..10 {
            input
                .send_to(
                    c.main(),
                    Ev {
                        seq,
                        ..Ev::default()
                    },
                )
                .expect("send");
        }
        c.shutdown().expect("shutdown");
        let mut out = Outcome::default();
        journal.verify(&mut out, 10);
        assert!(out.failures.is_empty(), "{:?}", out.failures);
        assert_eq!(out.params["recorded_entries"], 10);
        journal.verify(&mut out, 11);
        assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
        assert!(path.exists());
        drop(journal);
        assert!(!path.exists(), "the recording outlived its journal");
    }

    #[test]
    fn an_unreadable_recording_fails_the_run() {
        let journal = Journal::record("test/unreadable");
        let Journal::Record(path) = &journal else {
            unreachable!("a recording journal")
        };
        std::fs::write(path, b"not a recording").expect("write");
        let mut out = Outcome::default();
        journal.verify(&mut out, 0);
        assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
        let mut off = Outcome::default();
        Journal::Off.verify(&mut off, 1);
        assert!(off.failures.is_empty() && off.params.is_empty());
    }
}
