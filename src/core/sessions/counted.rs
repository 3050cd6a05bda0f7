//! The responses a tally counted, each by its key (`<id's length>:<id><requestId>`):
//! the keys' text end to end in one string, the set holding where each lies. A long
//! session counts ten thousand responses; a string apiece would be ten thousand
//! allocations while reading and as many frees when the tally is dropped, which a
//! `maestro usage` waits for.

use std::hash::BuildHasher;

use hashbrown::HashTable;

#[derive(Debug, Clone, Default)]
pub struct CountedKeys {
    /// Every key counted, one after another.
    text: String,
    /// Where each key lies in `text` (start, end).
    spans: HashTable<(usize, usize)>,
    hasher: foldhash::fast::RandomState,
    /// The key counted last (a response's lines come one after another): told
    /// without hashing.
    last: (usize, usize),
}

impl CountedKeys {
    /// Adds `key`; true when it was not counted before.
    pub fn insert(&mut self, key: &str) -> bool {
        let Self {
            text,
            spans,
            hasher,
            last,
        } = self;
        if text.get(last.0..last.1) == Some(key) {
            return false;
        }
        let at = |&(start, end): &(usize, usize)| &text[start..end];
        let entry = spans.entry(
            hasher.hash_one(key),
            |span| at(span) == key,
            |span| hasher.hash_one(at(span)),
        );
        let hashbrown::hash_table::Entry::Vacant(vacant) = entry else {
            return false;
        };
        let span = (text.len(), text.len() + key.len());
        vacant.insert(span);
        text.push_str(key);
        *last = span;
        true
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn contains(&self, key: &str) -> bool {
        let at = |&(start, end): &(usize, usize)| &self.text[start..end];
        self.spans
            .find(self.hasher.hash_one(key), |span| at(span) == key)
            .is_some()
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.spans
            .iter()
            .map(|&(start, end)| &self.text[start..end])
    }
}

/// The same keys, whatever their order.
impl PartialEq for CountedKeys {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.keys().all(|k| other.contains(k))
    }
}

#[cfg(test)]
mod tests {
    use super::CountedKeys;

    #[test]
    fn a_key_counts_once_and_the_sets_compare_by_their_keys() {
        let mut a = CountedKeys::default();
        assert!(a.insert("3:abcr1"));
        assert!(!a.insert("3:abcr1"), "the last key again");
        assert!(a.insert("2:xyr2"));
        assert!(!a.insert("3:abcr1"), "an older key again");
        assert!(a.insert("3:abcr10"), "a key that starts like another");
        assert_eq!(a.len(), 3);
        let mut b = CountedKeys::default();
        for k in ["3:abcr10", "2:xyr2", "3:abcr1"] {
            assert!(b.insert(k));
        }
        assert_eq!(a, b);
        assert!(b.insert("1:zr"));
        assert_ne!(a, b);
    }
}
