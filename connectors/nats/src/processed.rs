//! The stream sequences one ingress has had processed by the engine, as ranges.
//!
//! A JetStream server can deliver again a message it already had acknowledged for this consumer:
//! an acknowledgement lost with the connection, or a crash that restores the consumer's state
//! from before the acknowledgement reached its store. The ingress looks each message up here and
//! acknowledges a processed one without handing it to the engine again (see
//! [`Connector::consume`](crate::Connector::consume)).
//!
//! The set holds inclusive ranges keyed by their first sequence. An unfiltered consumer's
//! sequences are contiguous, so its set stays one range (plus a few while a redelivery fills a
//! gap). A filtered consumer's sequences have gaps; there each range may be one message, and the
//! set keeps the [`MAX_RANGES`] highest ranges: forgetting an old one only means a message
//! delivered again from that far back is processed again (at least once, still).

use std::collections::BTreeMap;

/// Ranges kept at most; above it the lowest range is forgotten.
pub(crate) const MAX_RANGES: usize = 4096;

/// Inclusive ranges of processed stream sequences.
#[derive(Debug, Default)]
pub(crate) struct Processed {
    /// first sequence -> last sequence (inclusive); ranges neither overlap nor touch.
    ranges: BTreeMap<u64, u64>,
}

impl Processed {
    /// Whether `sequence` was recorded.
    pub(crate) fn contains(&self, sequence: u64) -> bool {
        self.ranges
            .range(..=sequence)
            .next_back()
            .is_some_and(|(_, &last)| sequence <= last)
    }

    /// Records `sequence`, merging it with the ranges it touches.
    pub(crate) fn insert(&mut self, sequence: u64) {
        if self.contains(sequence) {
            return;
        }
        let below = self
            .ranges
            .range(..sequence)
            .next_back()
            .filter(|(_, &last)| last + 1 == sequence)
            .map(|(&first, _)| first);
        let above = sequence
            .checked_add(1)
            .and_then(|next| self.ranges.get(&next).copied());
        let first = below.unwrap_or(sequence);
        let last = match above {
            Some(last) => {
                self.ranges.remove(&(sequence + 1));
                last
            }
            None => sequence,
        };
        self.ranges.insert(first, last);
        if self.ranges.len() > MAX_RANGES {
            self.ranges.pop_first();
        }
    }

    #[cfg(test)]
    fn ranges(&self) -> Vec<(u64, u64)> {
        self.ranges.iter().map(|(&a, &b)| (a, b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_sequences_stay_one_range() {
        let mut p = Processed::default();
        for s in 1..=1000 {
            p.insert(s);
        }
        assert_eq!(p.ranges(), [(1, 1000)]);
        assert!(p.contains(1) && p.contains(500) && p.contains(1000));
        assert!(!p.contains(0) && !p.contains(1001));
    }

    #[test]
    fn a_gap_filled_later_merges_both_sides() {
        let mut p = Processed::default();
        for s in (1..=3).chain(7..=9) {
            p.insert(s);
        }
        assert_eq!(p.ranges(), [(1, 3), (7, 9)]);
        assert!(!p.contains(5));
        p.insert(5);
        assert_eq!(p.ranges(), [(1, 3), (5, 5), (7, 9)]);
        p.insert(4);
        p.insert(6);
        assert_eq!(p.ranges(), [(1, 9)]);
        p.insert(6);
        assert_eq!(p.ranges(), [(1, 9)]);
    }

    #[test]
    fn sparse_sequences_keep_the_highest_ranges() {
        let mut p = Processed::default();
        let n = MAX_RANGES as u64 + 10;
        for s in 0..n {
            p.insert(s * 2);
        }
        assert_eq!(p.ranges().len(), MAX_RANGES);
        assert!(!p.contains(0), "the lowest range is forgotten");
        assert!(p.contains((n - 1) * 2));
    }
}
