//! Keys named by two parts to dense slots, for the isolation [`Ledger`].
//!
//! A port is `(device, port)` and a GPU `(server, index)`; the ledger
//! compares them by name, so two keys with equal strings are one key
//! wherever their [`Name`]s were allocated. An [`Interner`] numbers keys
//! 0, 1, 2, … in order of first sight, which lets the ledger keep its
//! per-key state in plain vectors.
//!
//! Decisions made by a placer clone their names from the topology, so the
//! same `Arc<str>` comes back for the same port in decision after decision.
//! The interner therefore looks a key up by the *addresses* of its names
//! first (hashing two words, no string), and by the strings only the first
//! time a pair of addresses is seen. It keeps a clone of every name whose
//! address it remembers, so an address can never be freed and reused for
//! another string while it is remembered. Decisions whose names are fresh
//! allocations (parsed, say) only miss the fast path; the address table is
//! emptied when it outgrows the keys it stands for, so its size stays
//! bounded by the number of distinct keys. (issue 13: hashing and comparing
//! name strings was a quarter of a 5000-job replay at 8192 GPUs.)
//!
//! [`Ledger`]: super::Ledger

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::topology::Name;

type Map<K, V> = HashMap<K, V, RandomState>;

/// Remembered addresses beyond this many per slot (plus [`SLACK`]) empty
/// the address table.
const PER_SLOT: usize = 2;
const SLACK: usize = 4096;

/// Two-part keys to dense slots. One interner serves one kind of key:
/// either [`Interner::pair`] (two names) or [`Interner::numbered`] (a name
/// and a number), never both.
#[derive(Debug, Default)]
pub(super) struct Interner {
    /// Name strings to name ids.
    names: Map<Box<str>, u32>,
    /// (name id, name id or number) to slot.
    slots: Map<(u32, u32), u32>,
    /// (address, address or number) to slot: the fast path.
    by_addr: Map<(usize, usize), u32>,
    /// Clones of the names whose addresses `by_addr` holds.
    keep: Vec<Name>,
}

fn addr(n: &Name) -> usize {
    Arc::as_ptr(n).cast::<u8>().addr()
}

impl Interner {
    /// How many slots have been handed out (slots are `0..len`).
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slot of `(a, b)`, compared as strings.
    pub(super) fn pair(&mut self, a: &Name, b: &Name) -> u32 {
        let at = (addr(a), addr(b));
        if let Some(&s) = self.by_addr.get(&at) {
            return s;
        }
        let ids = (self.name(a), self.name(b));
        let s = self.slot(ids);
        self.remember(at, s, &[a, b]);
        s
    }

    /// The slot of `(a, n)`, `a` compared as a string.
    pub(super) fn numbered(&mut self, a: &Name, n: u16) -> u32 {
        let at = (addr(a), usize::from(n));
        if let Some(&s) = self.by_addr.get(&at) {
            return s;
        }
        let ids = (self.name(a), u32::from(n));
        let s = self.slot(ids);
        self.remember(at, s, &[a]);
        s
    }

    fn name(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.names.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.insert(s.into(), i);
        i
    }

    fn slot(&mut self, ids: (u32, u32)) -> u32 {
        let next = self.slots.len() as u32;
        *self.slots.entry(ids).or_insert(next)
    }

    fn remember(&mut self, at: (usize, usize), slot: u32, names: &[&Name]) {
        if self.by_addr.len() >= PER_SLOT * self.slots.len() + SLACK {
            self.by_addr.clear();
            self.keep.clear();
        }
        self.keep.extend(names.iter().map(|n| Arc::clone(n)));
        self.by_addr.insert(at, slot);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    /// Against a map of strings numbering keys in order of first sight,
    /// with names that are sometimes the same allocation, sometimes an
    /// equal string freshly allocated, and sometimes freed (so an
    /// allocator may hand an old address to a different string).
    #[test]
    fn interner_numbers_keys_like_a_string_map() {
        let mut rng = Pcg64Mcg::seed_from_u64(13);
        let strings: Vec<String> = (0..40).map(|i| format!("n{}", i * 7 % 23 + i)).collect();
        let shared: Vec<Name> = strings.iter().map(|s| Name::from(s.as_str())).collect();
        let mut pairs = Interner::default();
        let mut numbered = Interner::default();
        let mut want_pairs: HashMap<(String, String), u32> = HashMap::new();
        let mut want_numbered: HashMap<(String, u16), u32> = HashMap::new();
        let pick = |rng: &mut Pcg64Mcg| -> Name {
            let i = rng.random_range(0..strings.len());
            if rng.random_bool(0.5) {
                Arc::clone(&shared[i])
            } else {
                Name::from(strings[i].as_str())
            }
        };
        for _ in 0..20_000 {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let next = want_pairs.len() as u32;
            let want = *want_pairs
                .entry((a.to_string(), b.to_string()))
                .or_insert(next);
            assert_eq!(pairs.pair(&a, &b), want, "{a} {b}");
            let n = rng.random_range(0..5u16);
            let next = want_numbered.len() as u32;
            let want = *want_numbered.entry((a.to_string(), n)).or_insert(next);
            assert_eq!(numbered.numbered(&a, n), want, "{a} {n}");
            drop((a, b));
        }
        assert_eq!(pairs.len(), want_pairs.len());
        assert_eq!(numbered.len(), want_numbered.len());
        // Fresh allocations kept the address table bounded.
        assert!(pairs.by_addr.len() <= PER_SLOT * pairs.len() + SLACK);
        assert!(pairs.keep.len() <= 2 * (PER_SLOT * pairs.len() + SLACK));
    }
}
