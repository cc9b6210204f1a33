//! Spare task tables: a thread's few emptied [`SmallMap`]s, handed to the next task cache that
//! outgrows its one inline entry.
//!
//! A request that reaches a hundred context objects fills a table of a hundred entries and an
//! index; made anew per request, they cost a handful of allocations, the index's zeroing (four
//! bytes per proto of the graph), and a large block, whose allocation makes glibc consolidate
//! its fast bins, so that the request's small objects are then split from the top of the heap
//! (measured in `benches/RESULTS.md`, issue 27). A table given back here is emptied entry by
//! entry (its index too) and keeps its memory.

use std::cell::RefCell;

use crate::erased::AnyArc;
use crate::maps::{DrainNewest, SmallMap};

/// The most tables a thread keeps: about as many scopes as one worker runs interleaved.
const KEPT: usize = 8;

/// A table with room for more entries than this is not kept (its memory goes back).
const MOST_ROOM: usize = 1 << 14;

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

/// Empties `table` newest first, `drop` taking its objects (an object's `Drop` may end a
/// scope of its own, which gives a table back too: the spare tables are not borrowed
/// meanwhile), and keeps it for the next [`take`] if there is room.
pub(super) fn give_back(mut table: Box<SmallMap<AnyArc>>, drop: impl FnOnce(DrainNewest<'_, AnyArc>)) {
    drop(table.drain_newest_first());
    if table.capacity() > MOST_ROOM {
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
