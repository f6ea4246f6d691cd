//! Keys to partitions, partitions to processes.
//!
//! The server maps each key to a partition deterministically with a subject mapping of its
//! account (NATS 2.8+; stream-level transforms need 2.10):
//!
//! ```text
//! mappings = { "ev.*": "evp.{{partition(4,1)}}.{{wildcard(1)}}" }
//! ```
//!
//! A publisher sends key `k`'s events to `ev.k` (the key is one subject token: no `.`, `*`, `>`
//! or spaces); the server stores them as `evp.P.k` in a stream on `evp.>`. Each correlator process
//! consumes the partitions it owns, one durable consumer per partition with the filter
//! `evp.P.*`. JetStream keeps the order of each subject, one consumer delivers a partition in
//! stream order, one input handle per consumer keeps it into the engine (R2.3): every key's
//! events are processed in publish order by exactly one process.

/// A partitioned subject space: `{source}.KEY` is stored as `{target}.P.KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    /// The subject prefix publishers use (`ev`).
    pub source: String,
    /// The prefix the server maps to (`evp`).
    pub target: String,
    /// How many partitions.
    pub partitions: u32,
}

impl Partitioning {
    /// `partitions` partitions of `{source}.KEY` into `{target}.P.KEY`.
    pub fn new(source: impl Into<String>, target: impl Into<String>, partitions: u32) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
            partitions: partitions.max(1),
        }
    }

    /// The server mapping, as (source, destination) for the `mappings` block of its config.
    pub fn mapping(&self) -> (String, String) {
        (
            format!("{}.*", self.source),
            format!(
                "{}.{{{{partition({},1)}}}}.{{{{wildcard(1)}}}}",
                self.target, self.partitions
            ),
        )
    }

    /// The subject publishers use for `key`.
    pub fn publish_subject(&self, key: &str) -> String {
        format!("{}.{key}", self.source)
    }

    /// The subjects of the stream that stores every partition.
    pub fn stream_subject(&self) -> String {
        format!("{}.>", self.target)
    }

    /// The consumer filter of partition `p`.
    pub fn filter(&self, p: u32) -> String {
        format!("{}.{p}.*", self.target)
    }

    /// The partitions process `index` of `processes` owns: every partition `p` with
    /// `p % processes == index` (none when `index >= processes`).
    pub fn owned(&self, index: u32, processes: u32) -> Vec<u32> {
        (0..self.partitions)
            .filter(|p| processes > 0 && p % processes == index)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_cover_every_partition_once() {
        let p = Partitioning::new("ev", "evp", 5);
        let mut all: Vec<u32> = (0..2).flat_map(|i| p.owned(i, 2)).collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3, 4]);
        assert_eq!(
            p.mapping(),
            (
                "ev.*".into(),
                "evp.{{partition(5,1)}}.{{wildcard(1)}}".into()
            )
        );
        assert_eq!(p.filter(3), "evp.3.*");
    }
}
