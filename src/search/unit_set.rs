//! The label filter's query: the units whose key is in a set, found by one pass over a
//! column holding each unit's key hash. Its cost is that pass (a few ms per million units,
//! whatever the set's size), where a set of terms costs a lookup per unit named (about
//! 2 µs each: 20 ms for 10,000 labeled units).

use std::sync::Arc;

use foldhash::{HashSet, HashSetExt};
use tantivy::query::{BitSetDocSet, ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{BitSet, DocId, Score, SegmentReader, TantivyError};

/// The column of unit key hashes.
pub const UNIT_HASH: &str = "unit_hash";

/// The hash of a unit's key (its session's id and its `event_id`): FNV-1a, 64 bits, stable
/// across versions and processes (it is stored in the index). Two distinct units share a
/// hash with a probability of about 2^-64 per pair.
pub fn unit_hash(session_id: &str, event_id: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for &b in session_id
        .as_bytes()
        .iter()
        .chain(&[0])
        .chain(event_id.as_bytes())
    {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

/// Matches the units of a set (each by [`unit_hash`]); scores nothing.
#[derive(Debug, Clone)]
pub struct UnitSetQuery {
    hashes: Arc<HashSet<u64>>,
}

impl UnitSetQuery {
    /// The units `(session_id, event_id)` of `units`.
    pub fn new<'a>(units: impl IntoIterator<Item = (&'a str, &'a str)>) -> UnitSetQuery {
        let mut hashes = HashSet::new();
        hashes.extend(units.into_iter().map(|(s, e)| unit_hash(s, e)));
        UnitSetQuery {
            hashes: Arc::new(hashes),
        }
    }
}

impl Query for UnitSetQuery {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(UnitSetWeight {
            hashes: self.hashes.clone(),
        }))
    }
}

struct UnitSetWeight {
    hashes: Arc<HashSet<u64>>,
}

impl UnitSetWeight {
    /// The documents of `reader` whose unit is in the set.
    fn matching(&self, reader: &SegmentReader) -> tantivy::Result<BitSet> {
        let column = reader.fast_fields().u64(UNIT_HASH)?.first_or_default_col(0);
        let max_doc = reader.max_doc();
        let mut matching = BitSet::with_max_value(max_doc);
        let mut chunk = vec![0u64; 4096];
        let mut start: DocId = 0;
        while start < max_doc {
            let n = (max_doc - start).min(chunk.len() as DocId) as usize;
            column.get_range(u64::from(start), &mut chunk[..n]);
            for (i, hash) in chunk[..n].iter().enumerate() {
                if self.hashes.contains(hash) {
                    matching.insert(start + i as DocId);
                }
            }
            start += n as DocId;
        }
        Ok(matching)
    }
}

impl Weight for UnitSetWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let docs = BitSetDocSet::from(self.matching(reader)?);
        Ok(Box::new(ConstScorer::new(docs, boost)))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        if self.matching(reader)?.contains(doc) {
            Ok(Explanation::new("a unit of the set", 0.0))
        } else {
            Err(TantivyError::InvalidArgument(format!(
                "document {doc} is not a unit of the set"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_hash_tells_the_session_from_the_event() {
        assert_eq!(unit_hash("s", "e"), unit_hash("s", "e"));
        assert_ne!(unit_hash("s", "e"), unit_hash("s", "f"));
        assert_ne!(
            unit_hash("ab", "c"),
            unit_hash("a", "bc"),
            "the NUL keeps them apart"
        );
        // FNV-1a's published value for the one byte 0 (an empty session and event).
        assert_eq!(unit_hash("", ""), 0xaf63_bd4c_8601_b7df);
    }
}
