//! The helper threads a started correlator runs: the periodic status line
//! (`status_interval`), the `metrics` exporter (`export_metrics`), the clock (`tick_rate`) and
//! the checkpointer (`checkpoint_every`),
//! each a [`Periodic`] thread that parks between its jobs; and [`Lifecycle::start`], which lets
//! the contexts go and starts them.
//!
//! May import the leaves, `deliver`, `metrics` and `shared`.

use std::time::{Duration, Instant};

use crate::deliver::{Links, NoPlaces, Wait};
use crate::event::Event;
use crate::shared::Shared;
use crate::sync::{self, Arc, AtomicBool, JoinHandle, Ordering};
use crate::time::Time;

use super::{status_of, Lifecycle};

/// A helper thread (status line, clock) that parks between its periodic jobs.
pub(super) struct Periodic {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Periodic {
    /// Runs `job` every `interval` on a parked helper thread until stopped.
    fn start(
        name: &str,
        interval: Duration,
        mut job: impl FnMut() + Send + 'static,
    ) -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // It never competes with the contexts for a core: it sleeps between jobs.
        let thread = sync::spawn_named(name.to_owned(), move || {
            let mut next = Instant::now() + interval;
            while !flag.load(Ordering::Acquire) {
                let now = Instant::now();
                if now < next {
                    sync::park_timeout(next - now);
                    continue;
                }
                next += interval;
                job();
            }
        })
        .ok()?;
        Some(Self { stop, thread })
    }

    pub(super) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

impl Lifecycle {
    /// [`Correlator::start`](super::Correlator::start) over the shared state.
    pub(super) fn start<E: Event>(&self, shared: &Arc<Shared<E>>) {
        if shared.started.swap(true, Ordering::AcqRel) {
            return;
        }
        for ctx in shared.snapshot() {
            ctx.unpark();
        }
        if let Some(interval) = shared.settings.status_interval {
            let shared = shared.clone();
            let logger = Periodic::start("correlator-status", interval, move || {
                let status = status_of(&shared);
                tracing::info!(target: "correlator::status", "{status}");
            });
            *sync::lock(&self.status_logger) = logger;
        }
        #[cfg(feature = "metrics")]
        if let Some(interval) = shared.settings.metrics_interval {
            crate::metrics::describe();
            let shared = shared.clone();
            let exporter = Periodic::start("correlator-metrics", interval, move || {
                crate::metrics::export(&status_of(&shared));
            });
            *sync::lock(&self.metrics_exporter) = exporter;
        }
        // A replay takes its ticks from the recording.
        let replaying = shared.journal.as_ref().is_some_and(|j| j.is_replay());
        if let (Some(rate), false) = (shared.settings.tick_rate, replaying) {
            self.start_clock(shared, rate);
        }
    }

    /// Starts the `checkpoint_every` job, if one is set and not running: a checkpoint every
    /// interval, on a thread of its own; a checkpoint that fails is reported (`tracing`,
    /// WARN) and the next one is tried at the next interval.
    #[cfg(feature = "checkpoint")]
    pub(super) fn start_checkpointer<E: Event>(
        &self,
        shared: &Arc<Shared<E>>,
        checkpoints: &crate::sync::StdArc<super::checkpointing::Checkpoints<E>>,
    ) {
        let Some(interval) = checkpoints.interval() else {
            return;
        };
        let mut job = sync::lock(&self.checkpointer);
        if job.is_some() {
            return;
        }
        let (shared, checkpoints) = (shared.clone(), checkpoints.clone());
        *job = Periodic::start("correlator-checkpoint", interval, move || match checkpoints
            .checkpoint(&shared)
        {
            Ok(seq) => tracing::debug!(seq, "checkpoint saved"),
            Err(e) => tracing::warn!(error = %e, "a periodic checkpoint failed"),
        });
    }

    fn start_clock<E: Event>(&self, shared: &Arc<Shared<E>>, per_second: u32) {
        let mut links = Links::new(shared.clone(), None, NoPlaces);
        // Fill the clock's context cache now, so that a tick allocates only after a context was
        // created since the previous one (never in the steady state).
        links.refresh();
        let origin = Instant::now();
        let interval = Duration::from_secs(1) / per_second;
        let clock = Periodic::start("correlator-clock", interval, move || {
            // Never wait: a full inbox skips this tick, the next carries the later time.
            links.send_time_all(Time::from(origin.elapsed()), Wait::Never);
        });
        *sync::lock(&self.clock) = clock;
    }
}
