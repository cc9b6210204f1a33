//! Small maps: a hasher for keys that already are hashes, and the proto-indexed map a scope
//! and a task cache keep. Floor 0.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A `TypeId` already is a good hash; hashing it again with SipHash costs more than the lookup.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    /// Eight bytes at a time (object names are hashed too, one per proto at build).
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
            self.write_u64(word);
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.write_u64(u64::from_le_bytes(tail) ^ (rest.len() as u64) << 56);
    }
    /// A folded multiply: the 128-bit product's halves xor-ed, so that every input bit reaches
    /// the low bits hash tables index by (a plain multiply only carries bits up: names that
    /// differ past their first bytes shared a handful of buckets).
    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// A small map from proto index to value: a linear scan while small (the common case: a request
/// touches a handful of context objects), an index once it grows.
pub(crate) struct SmallMap<V> {
    /// The entries in insertion order; an entry never moves, so a position stays valid.
    items: Vec<(u32, V)>,
    index: Option<Index>,
}

/// Where each key of a grown [`SmallMap`] is.
enum Index {
    Hash(FastMap<u32, usize>),
    /// Position + 1 by key (0: absent), for a map expected to hold a good share of the keys:
    /// a lookup is a load, where hashing costs tens of instructions and a cache miss.
    Dense(Box<[u32]>),
}

impl Index {
    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<usize> {
        match self {
            Index::Hash(index) => index.get(&key).copied(),
            Index::Dense(index) => index.get(key as usize).and_then(|&p| (p as usize).checked_sub(1)),
        }
    }

    /// [`get`](Self::get) of a hash index, out of line: the probe is long code, and a dense
    /// index's lookup is one load.
    #[inline(never)]
    fn get_hashed(&self, key: u32) -> Option<usize> {
        self.get(key)
    }

    fn insert(&mut self, key: u32, pos: usize) {
        match self {
            Index::Hash(index) => {
                index.insert(key, pos);
            }
            Index::Dense(index) => {
                if index.len() <= key as usize {
                    let mut grown = std::mem::take(index).into_vec();
                    grown.resize(key as usize + 1, 0);
                    *index = grown.into_boxed_slice();
                }
                index[key as usize] = dense_position(pos);
            }
        }
    }
}

/// Position `pos` as a dense index stores it (+ 1: 0 is absent).
#[inline]
fn dense_position(pos: usize) -> u32 {
    u32::try_from(pos + 1).expect("fewer than 2^32 objects in a scope")
}

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap { items: Vec::new(), index: None }
    }
}

/// [`SmallMap::drain_newest_first`]'s iterator.
pub(crate) struct DrainNewest<'a, V> {
    map: &'a mut SmallMap<V>,
}

impl<V> Iterator for DrainNewest<'_, V> {
    type Item = V;

    fn next(&mut self) -> Option<V> {
        let (key, value) = self.map.items.pop()?;
        // A hash index is cleared at the end, in one pass; a dense one is four bytes per key
        // of the graph, so only the entries written are.
        if let Some(Index::Dense(index)) = &mut self.map.index
            && let Some(pos) = index.get_mut(key as usize)
        {
            *pos = 0;
        }
        Some(value)
    }
}

impl<V> Drop for DrainNewest<'_, V> {
    fn drop(&mut self) {
        self.by_ref().for_each(drop);
        if let Some(Index::Hash(index)) = &mut self.map.index {
            index.clear();
        }
    }
}

pub(crate) const LINEAR_LIMIT: usize = 16;

/// A dense index costs four bytes per key in the map's key space: worth it from one entry per
/// this many keys (a table of 10,000 objects in a graph of 20,000 protos: 80 KB, zeroed by the
/// allocator, against 10,000 hash insertions).
const DENSE_SHARE: usize = 64;

impl<V> SmallMap<V> {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The entries, in insertion order, by reference.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &(u32, V)> {
        self.items.iter()
    }

    /// The entries, in insertion order.
    pub(crate) fn into_items(self) -> std::vec::IntoIter<(u32, V)> {
        self.items.into_iter()
    }

    /// The memory the map holds, in bytes, about: its entries' room and its index (a dense
    /// index is four bytes per key of its key space, however few the entries).
    pub(crate) fn held_bytes(&self) -> usize {
        let index = match &self.index {
            None => 0,
            Some(Index::Hash(index)) => index.capacity() * (size_of::<(u32, usize)>() + 1),
            Some(Index::Dense(index)) => index.len() * size_of::<u32>(),
        };
        self.items.capacity() * size_of::<(u32, V)>() + index
    }

    /// Empties the map newest first, its values yielded one by one, and keeps its memory (the
    /// room for entries, the index) for its next use. An entry leaves the map as it is yielded;
    /// those left when the iterator is dropped are dropped with it.
    pub(crate) fn drain_newest_first(&mut self) -> DrainNewest<'_, V> {
        DrainNewest { map: self }
    }

    /// Makes room for `total` entries in all (the index included, once there is one). With
    /// `keys`, the size of the key space, an index expected to hold a good share of it is made
    /// dense.
    pub(crate) fn reserve_total(&mut self, total: usize, keys: Option<usize>) {
        self.items.reserve(total.saturating_sub(self.items.len()));
        match (&mut self.index, keys) {
            (Some(Index::Hash(_)), Some(keys)) if total.saturating_mul(DENSE_SHARE) >= keys => {
                let mut index = Index::Dense(vec![0u32; keys].into_boxed_slice());
                for (pos, (key, _)) in self.items.iter().enumerate() {
                    index.insert(*key, pos);
                }
                self.index = Some(index);
            }
            (Some(Index::Hash(index)), _) => index.reserve(total.saturating_sub(index.len())),
            _ => {}
        }
    }

    /// The value of `key`. Inline: a linear scan, a dense index; a hash index out of line.
    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&V> {
        let pos = match &self.index {
            None => return self.items.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            Some(Index::Dense(index)) => (*index.get(key as usize)? as usize).checked_sub(1)?,
            Some(hashed) => hashed.get_hashed(key)?,
        };
        Some(&self.items[pos].1)
    }

    /// Where `key` is, for [`at_mut`](Self::at_mut).
    pub(crate) fn position(&self, key: u32) -> Option<usize> {
        match &self.index {
            None => self.items.iter().position(|(k, _)| *k == key),
            Some(index) => index.get(key),
        }
    }

    /// The value at position `pos`, as [`position`](Self::position) or
    /// [`insert`](Self::insert) gave it.
    pub(crate) fn value_at(&self, pos: usize) -> &V {
        &self.items[pos].1
    }

    /// The value at position `pos`, mutably.
    pub(crate) fn value_at_mut(&mut self, pos: usize) -> &mut V {
        &mut self.items[pos].1
    }

    /// The value of `key` at position `pos` (entries never move): no lookup.
    pub(crate) fn at_mut(&mut self, pos: usize, key: u32) -> Option<&mut V> {
        self.items.get_mut(pos).filter(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Adds `key` (absent) and returns its position. Inline, for the cases a scope meets per
    /// object (a small map, a dense index with room for the key); out of line, the rest.
    #[inline]
    pub(crate) fn insert(&mut self, key: u32, value: V) -> usize {
        let pos = self.items.len();
        self.items.push((key, value));
        match &mut self.index {
            None if pos < LINEAR_LIMIT => {}
            Some(Index::Dense(index)) if (key as usize) < index.len() => index[key as usize] = dense_position(pos),
            _ => self.index_slow(key, pos),
        }
        pos
    }

    /// [`insert`](Self::insert)'s index, in the cases it does not inline: the map grows past
    /// a linear scan, a hash index, a dense index too short for the key.
    #[cold]
    #[inline(never)]
    fn index_slow(&mut self, key: u32, pos: usize) {
        match &mut self.index {
            Some(index) => index.insert(key, pos),
            None => self.index = Some(Index::Hash(self.items.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::{IdHasher, Index, LINEAR_LIMIT, SmallMap};

    fn filled(keys: impl Iterator<Item = u32>) -> SmallMap<u32> {
        let mut map = SmallMap::default();
        for key in keys {
            map.insert(key, key * 10);
        }
        map
    }

    fn assert_finds(map: &mut SmallMap<u32>, keys: &[u32], absent: &[u32]) {
        for &key in keys {
            assert_eq!(map.get(key), Some(&(key * 10)), "key {key}");
            let pos = map.position(key).unwrap();
            assert_eq!(map.at_mut(pos, key).copied(), Some(key * 10));
        }
        for &key in absent {
            assert_eq!(map.get(key), None, "key {key}");
            assert_eq!(map.position(key), None);
        }
    }

    #[test]
    fn a_map_finds_its_keys_linear_hashed_and_dense() {
        // Keys spread as a large graph's context protos are (every third).
        let keys: Vec<u32> = (0..40).map(|i| i * 3 + 1).collect();
        let absent = [0, 2, 300, u32::MAX];

        let mut linear = filled(keys[..LINEAR_LIMIT].iter().copied());
        assert!(linear.index.is_none());
        assert_finds(&mut linear, &keys[..LINEAR_LIMIT], &absent);

        let mut hashed = filled(keys.iter().copied());
        assert!(matches!(hashed.index, Some(Index::Hash(_))));
        assert_finds(&mut hashed, &keys, &absent);

        // Expected to hold 40 of 130 keys: dense; a key past its end grows it.
        let mut dense = filled(keys[..LINEAR_LIMIT + 1].iter().copied());
        dense.reserve_total(40, Some(130));
        assert!(matches!(dense.index, Some(Index::Dense(_))));
        assert!(dense.held_bytes() >= 130 * 4, "the dense index counts for its whole key space");
        for &key in &keys[LINEAR_LIMIT + 1..] {
            dense.insert(key, key * 10);
        }
        dense.insert(500, 5000);
        assert_finds(&mut dense, &keys, &absent);
        assert_eq!(dense.get(500), Some(&5000));

        // Expected to hold 40 of 100,000 keys: stays hashed.
        let mut sparse = filled(keys[..LINEAR_LIMIT + 1].iter().copied());
        sparse.reserve_total(40, Some(100_000));
        assert!(matches!(sparse.index, Some(Index::Hash(_))));
    }

    /// A drained map is empty whatever its index, gives its values newest first, and is as
    /// good as new for other keys (a dense index left with a stale position would find them).
    #[test]
    fn a_drained_map_is_empty_and_reusable() {
        let keys: Vec<u32> = (0..40).map(|i| i * 3 + 1).collect();
        let mut hashed = filled(keys.iter().copied());
        let mut dense = filled(keys[..LINEAR_LIMIT + 1].iter().copied());
        dense.reserve_total(40, Some(130));
        for &key in &keys[LINEAR_LIMIT + 1..] {
            dense.insert(key, key * 10);
        }
        for map in [&mut hashed, &mut dense, &mut filled(keys[..3].iter().copied())] {
            let mut seen = Vec::new();
            let len = map.len();
            seen.extend(map.drain_newest_first());
            let expected: Vec<u32> = keys[..len].iter().rev().map(|k| k * 10).collect();
            assert_eq!(seen, expected);
            assert_eq!(map.len(), 0);
            assert!(map.held_bytes() >= len * size_of::<(u32, u32)>());
            assert_finds(map, &[], &keys);
            // Other keys, at the positions the old ones had.
            let again: Vec<u32> = keys.iter().map(|k| k + 1).take(len).collect();
            for &key in &again {
                map.insert(key, key * 10);
            }
            assert_finds(map, &again, &keys);
        }
    }

    #[test]
    fn a_position_that_no_longer_holds_its_key_finds_nothing() {
        let mut map = filled([7, 8].into_iter());
        assert_eq!(map.at_mut(0, 8), None);
        assert_eq!(map.at_mut(5, 7), None);
    }

    /// Hash tables take the low bits: names that differ only past their first bytes must still
    /// spread over them (before `finish` rotated, 10000 such names shared one bucket).
    #[test]
    fn names_spread_over_the_low_bits() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let buckets: std::collections::HashSet<u64> =
            (0..10_000).map(|i| build.hash_one(format!("node{i:04}")) & 1023).collect();
        assert!(buckets.len() > 900, "{} of 1024 buckets used", buckets.len());
        let typed: std::collections::HashSet<u64> = (0..10_000u64)
            .map(|i| build.hash_one((std::any::TypeId::of::<u8>(), format!("filler{i}"))) & 1023)
            .collect();
        assert!(typed.len() > 900, "{} of 1024 buckets used", typed.len());
    }
}
