//! A replaying context's side: the buffers per origin and the walk along its recorded stream
//! (see "How a replay enforces the order" in the module docs).
//!
//! Owns the replay's order and checks. May import the leaves.

use std::collections::{HashMap, VecDeque};

use super::{describe_origin, Divergence, JournalShared, Origin, Record};
use crate::sync::StdArc as Arc;

/// What a replaying context does next.
pub(crate) enum Step<I> {
    /// Process this entry.
    Entry(I),
    /// Take a recorded clock tick to this time (nanoseconds).
    Tick(u64),
    /// Process this recorded input event (its bytes), as from this origin.
    Input(Origin, Vec<u8>),
    /// Nothing until more arrives.
    Wait,
    /// The stream is used up, or the replay diverged: process nothing more.
    Stop,
}

pub(crate) struct Replayer<I> {
    shared: Arc<JournalShared>,
    context: u32,
    /// The context's recorded stream (`None`: the recording has no such context).
    records: Option<Arc<super::Recording>>,
    stream: usize,
    /// The next record of the stream.
    at: usize,
    /// Entries left in the current run, and its origin.
    run: Option<(u32, u64)>,
    pending: HashMap<u32, VecDeque<I>>,
    /// Entries processed (runs and ticks).
    taken: u64,
    stopped: bool,
}

impl<I> Replayer<I> {
    pub(super) fn new(shared: Arc<JournalShared>, context: u32) -> Self {
        let recording = match &*shared {
            super::JournalShared::Replay { recording, .. } => recording.clone(),
            super::JournalShared::Record { .. } => unreachable!("a replayer of a recording"),
        };
        let stream = recording.contexts.iter().position(|c| c.context == context);
        let mut r = Self {
            shared,
            context,
            records: stream.is_some().then_some(recording),
            stream: stream.unwrap_or(0),
            at: 0,
            run: None,
            pending: HashMap::new(),
            taken: 0,
            stopped: false,
        };
        match r.peek().cloned() {
            Some(Record::Begin { context: c, .. }) if c == context => r.at += 1,
            other => r.diverge(
                other.map_or("no stream for this context".into(), |o| format!("{o:?}")),
                "a context that began".into(),
            ),
        }
        r
    }

    fn peek(&self) -> Option<&Record> {
        self.records
            .as_ref()
            .and_then(|r| r.contexts[self.stream].records.get(self.at))
    }

    /// An entry from `origin` arrived in the inbox.
    pub(crate) fn arrive(&mut self, origin: Origin, item: I) {
        if !self.stopped {
            self.pending.entry(origin.0).or_default().push_back(item);
        }
    }

    /// The next step, in the stream's order.
    pub(crate) fn next(&mut self) -> Step<I> {
        loop {
            if self.stopped {
                return Step::Stop;
            }
            if self.shared.has_diverged() {
                self.stopped = true;
                return Step::Stop;
            }
            if let Some((origin, left)) = self.run {
                let Some(item) = self.pending.get_mut(&origin).and_then(VecDeque::pop_front) else {
                    return Step::Wait;
                };
                self.run = (left > 1).then_some((origin, left - 1));
                self.taken += 1;
                return Step::Entry(item);
            }
            match self.peek().cloned() {
                Some(Record::Run { origin, count }) => {
                    self.at += 1;
                    self.run = (count > 0).then_some((origin, count));
                }
                Some(Record::Tick { time }) => {
                    self.at += 1;
                    self.taken += 1;
                    return Step::Tick(time);
                }
                Some(Record::Input { origin, bytes }) => {
                    self.at += 1;
                    self.taken += 1;
                    return Step::Input(Origin(origin), bytes);
                }
                Some(Record::End { .. }) => return Step::Wait,
                Some(other) => {
                    self.diverge(
                        format!("{other:?}"),
                        "the next inbox entry (the recorded record did not happen)".into(),
                    );
                }
                None => {
                    self.diverge("the end of a stream cut short".into(), "more work".into());
                }
            }
        }
    }

    /// The context did `what` (an emit, a context created): it must be the stream's next record,
    /// with no entry of the current run left.
    pub(crate) fn expect(&mut self, what: Record) {
        if self.stopped {
            return;
        }
        if let Some((origin, left)) = self.run {
            return self.diverge(
                format!("{left} more entries from {} first", describe_origin(origin)),
                format!("{what:?}"),
            );
        }
        match self.peek() {
            Some(r) if *r == what => self.at += 1,
            other => {
                let expected =
                    other.map_or("the end of a stream cut short".into(), |o| format!("{o:?}"));
                self.diverge(expected, format!("{what:?}"));
            }
        }
    }

    /// At the context's end: the stream must be at its `End`, with nothing left over.
    pub(super) fn end(&mut self) {
        if self.stopped {
            return;
        }
        if let Some((origin, left)) = self.run {
            return self.diverge(
                format!("{left} more entries from {}", describe_origin(origin)),
                "the end of the run (nothing more arrived)".into(),
            );
        }
        if !matches!(self.peek(), Some(Record::End { .. })) {
            let expected = self
                .peek()
                .map_or("the end of a stream cut short".into(), |r| format!("{r:?}"));
            return self.diverge(expected, "the end of the run".into());
        }
        if let Some((origin, q)) = self.pending.iter().find(|(_, q)| !q.is_empty()) {
            let origin = *origin;
            let n = q.len();
            self.diverge(
                "the end of the run".into(),
                format!(
                    "{n} entries from {} that the recording does not have",
                    describe_origin(origin)
                ),
            );
        }
        self.stopped = true;
    }

    /// A recorded input could not be decoded: the replay diverges at it.
    pub(crate) fn undecodable(&mut self, why: String) {
        self.at -= 1;
        self.diverge(
            "an input event".into(),
            format!("bytes the codec cannot decode: {why}"),
        );
    }

    fn diverge(&mut self, expected: String, found: String) {
        self.stopped = true;
        self.pending.clear();
        self.shared.diverge(Divergence {
            context: self.context,
            entry: self.taken,
            position: self.at as u64,
            expected,
            found,
        });
    }
}
