//! How many bytes a parsed session holds on the heap, counted from what it holds.
//!
//! The store keeps parsed sessions under a memory budget; an estimate from the input's size
//! alone is wrong by two orders of magnitude on logs of many tiny records.
//! [`HeapSize`] walks the structures instead: every `String`, `Vec` and `Box` by its
//! capacity, every hash map by its buckets. The figure is what was asked of the allocator;
//! the allocator's own rounding and bookkeeping add roughly a tenth on top.

use std::collections::BTreeMap;
use std::mem::size_of;

/// Bytes a value owns on the heap, beyond its own inline size.
pub trait HeapSize {
    /// The bytes requested from the allocator for what this value owns.
    fn heap_size(&self) -> usize;
}

/// Implements [`HeapSize`] as zero for types that own nothing on the heap.
macro_rules! owns_nothing {
    ($($t:ty),* $(,)?) => {
        $(impl $crate::heap::HeapSize for $t {
            fn heap_size(&self) -> usize {
                0
            }
        })*
    };
}
pub(crate) use owns_nothing;

owns_nothing!(bool, u32, u64, usize, i64, serde_json::Number, (usize, usize),);

impl HeapSize for String {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
}

impl HeapSize for Box<str> {
    fn heap_size(&self) -> usize {
        self.len()
    }
}

/// Each holder of a shared string counts its share, so that the holders together count it
/// once.
impl HeapSize for std::sync::Arc<str> {
    fn heap_size(&self) -> usize {
        self.len() / std::sync::Arc::strong_count(self)
    }
}

impl<T: HeapSize> HeapSize for Box<T> {
    fn heap_size(&self) -> usize {
        size_of::<T>() + (**self).heap_size()
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> usize {
        self.as_ref().map_or(0, HeapSize::heap_size)
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_size(&self) -> usize {
        self.capacity() * size_of::<T>() + self.iter().map(HeapSize::heap_size).sum::<usize>()
    }
}

impl<K: HeapSize, V: HeapSize> HeapSize for BTreeMap<K, V> {
    fn heap_size(&self) -> usize {
        // A B-tree node holds up to 11 entries; count nodes as if two thirds full.
        let entries = self.len() * (size_of::<K>() + size_of::<V>()) * 3 / 2;
        entries
            + self
                .iter()
                .map(|(k, v)| k.heap_size() + v.heap_size())
                .sum::<usize>()
    }
}

impl<K: HeapSize, V: HeapSize, S> HeapSize for std::collections::HashMap<K, V, S> {
    fn heap_size(&self) -> usize {
        hash_table_bytes::<(K, V)>(self.capacity())
            + self
                .iter()
                .map(|(k, v)| k.heap_size() + v.heap_size())
                .sum::<usize>()
    }
}

/// The bytes of a SwissTable (std's and foldhash's maps) that can hold `capacity` entries:
/// a power of two of buckets at 7/8 load, one entry and one control byte each.
fn hash_table_bytes<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = (capacity * 8 / 7).next_power_of_two();
    buckets * (size_of::<T>() + 1)
}
