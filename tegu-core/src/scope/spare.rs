//! Spare task tables: a thread's few emptied [`SmallMap`]s, handed to the next task cache that
//! outgrows its one inline entry.
//!
//! A request that reaches a hundred context objects fills a table of a hundred entries and an
//! index; made anew per request, they cost a handful of allocations, the index's zeroing (four
//! bytes per proto of the graph), and a large block, whose allocation makes glibc consolidate
//! its fast bins, so that the request's small objects are then split from the top of the heap
//! (measured in `benches/RESULTS.md`). A table given back here is emptied entry by
//! entry (its index too) and keeps its memory.

use std::cell::RefCell;

use crate::erased::AnyArc;
use crate::maps::SmallMap;

/// The most tables a thread keeps: about as many scopes as one worker runs interleaved.
const KEPT: usize = 8;

/// A table holding more memory than this (its entries' room and its index) is not kept: a
/// thread keeps at most `KEPT` times this.
const MOST_BYTES: usize = 1 << 20;

std::thread_local! {
    // Boxed as the task cache holds them: a table moves in and out with no allocation.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<SmallMap<AnyArc>>>> = const { RefCell::new(Vec::new()) };
}

/// An empty table: a spare one of this thread's, or a new one.
pub(super) fn take() -> Box<SmallMap<AnyArc>> {
    let spare = SPARE.try_with(|spare| spare.try_borrow_mut().ok()?.pop()).ok().flatten();
    spare.unwrap_or_default()
}

/// Empties `table`, its objects dropped newest first, each isolated from the others' panics
/// (an object's `Drop` may end a scope of its own, which gives a table back too: the spare
/// tables are not borrowed meanwhile), and keeps it for the next [`take`] if there is room.
pub(super) fn give_back(mut table: Box<SmallMap<AnyArc>>) {
    crate::isolate::drop_each_isolated(table.drain_newest_first());
    if table.held_bytes() > MOST_BYTES {
        return;
    }
    let _ = SPARE.try_with(|spare| {
        if let Ok(mut spare) = spare.try_borrow_mut()
            && spare.len() < KEPT
        {
            spare.push(table);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{KEPT, MOST_BYTES, give_back, take};
    use crate::erased::AnyArc;

    /// A table of `entries` objects, each an `Arc<usize>`.
    fn table(entries: usize) -> Box<crate::maps::SmallMap<AnyArc>> {
        let mut table = take();
        for key in 0..entries {
            table.insert(key as u32, Arc::new(key) as AnyArc);
        }
        table
    }

    #[test]
    fn a_thread_keeps_a_few_tables_of_bounded_size_emptied() {
        // Run on a thread of its own: the spares are this thread's.
        std::thread::spawn(|| {
            let object: AnyArc = Arc::new(7usize);
            let mut kept = table(40);
            kept.insert(99, object.clone());
            give_back(kept);
            assert_eq!(Arc::strong_count(&object), 1, "emptied: the object was dropped");
            let again = take();
            assert_eq!(again.len(), 0);
            assert!(again.held_bytes() > 0, "the same table, its memory kept");

            // Too large a table is not kept.
            let large = table(MOST_BYTES / size_of::<(u32, AnyArc)>() + 1);
            give_back(large);
            assert_eq!(take().held_bytes(), 0, "a new table");

            // At most KEPT tables.
            let tables: Vec<_> = (0..KEPT + 2).map(|_| table(20)).collect();
            for table in tables {
                give_back(table);
            }
            let kept: Vec<_> = (0..KEPT + 2).map(|_| take()).collect();
            assert_eq!(kept.iter().filter(|t| t.held_bytes() > 0).count(), KEPT);
        })
        .join()
        .unwrap();
    }
}
