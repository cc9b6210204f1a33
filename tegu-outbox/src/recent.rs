//! The ids of the events an instance handled lately: a repeat is recognised in memory, before
//! the inbox is read.

use std::collections::{HashSet, VecDeque};

/// The last `capacity` ids, forgotten oldest first.
#[derive(Debug)]
pub(crate) struct Recent {
    capacity: usize,
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Recent {
    pub(crate) fn new(capacity: usize) -> Recent {
        Recent { capacity: capacity.max(1), order: VecDeque::new(), ids: HashSet::new() }
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Remembers `id`, forgetting the oldest past the capacity.
    pub(crate) fn insert(&mut self, id: String) {
        if !self.ids.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    #[test]
    fn remembers_the_last_ids_up_to_its_capacity() {
        let mut recent = Recent::new(2);
        for id in ["a", "b", "a", "c"] {
            recent.insert(id.to_owned());
        }
        assert!(!recent.contains("a"), "the oldest is forgotten");
        assert!(recent.contains("b") && recent.contains("c"));
    }
}
