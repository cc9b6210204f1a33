//! The counting global allocator: install it with
//! `#[global_allocator] static A: Counting = Counting;`, then count the allocations of a
//! phase, either process-wide ([`measure`]: every thread) or on this thread only
//! ([`count_on_this_thread`]: tests that must not see the allocations of tests running beside
//! them).
//!
//! Off, it costs one relaxed load per allocation. Process-wide counting uses shared atomics, so
//! it is switched on only for a sequential phase, never while throughput is measured.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// What is counted now: [`GLOBAL`] (by [`measure`]) and/or [`THREAD`] (some thread is in
/// [`count_on_this_thread`]).
static MODE: AtomicU8 = AtomicU8::new(0);
const GLOBAL: u8 = 1;
const THREAD: u8 = 2;
/// How many threads are in [`count_on_this_thread`].
static THREADS_COUNTING: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // `const`-initialised with no destructor: reading them never allocates.
    static THIS_THREAD: Cell<bool> = const { Cell::new(false) };
    static THIS_THREAD_COUNT: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting.
#[derive(Debug)]
pub struct Counting;

impl Counting {
    #[inline]
    fn count(size: usize) {
        let mode = MODE.load(Ordering::Relaxed);
        if mode == 0 {
            return;
        }
        if mode & GLOBAL != 0 {
            COUNT.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(size as u64, Ordering::Relaxed);
        }
        if mode & THREAD != 0 && THIS_THREAD.with(Cell::get) {
            THIS_THREAD_COUNT.with(|c| c.set(c.get() + 1));
        }
    }
}

// SAFETY: every call is forwarded unchanged to `System`; the counters touch no memory of the
// caller's, and the thread-locals never allocate.
#[expect(unsafe_code, reason = "a global allocator is an unsafe trait; this one counts and forwards to `System`")]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count(new_size);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations and bytes allocated while `f` runs (by any thread).
pub async fn measure<F: std::future::Future>(f: F) -> (u64, u64, F::Output) {
    let (c0, b0) = (COUNT.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
    MODE.fetch_or(GLOBAL, Ordering::SeqCst);
    let out = f.await;
    MODE.fetch_and(!GLOBAL, Ordering::SeqCst);
    (COUNT.load(Ordering::SeqCst) - c0, BYTES.load(Ordering::SeqCst) - b0, out)
}

/// Allocations made on this thread while `f` runs.
pub fn count_on_this_thread(f: impl FnOnce()) -> usize {
    THIS_THREAD_COUNT.with(|c| c.set(0));
    THIS_THREAD.with(|on| on.set(true));
    if THREADS_COUNTING.fetch_add(1, Ordering::SeqCst) == 0 {
        MODE.fetch_or(THREAD, Ordering::SeqCst);
    }
    f();
    if THREADS_COUNTING.fetch_sub(1, Ordering::SeqCst) == 1 {
        MODE.fetch_and(!THREAD, Ordering::SeqCst);
    }
    THIS_THREAD.with(|on| on.set(false));
    THIS_THREAD_COUNT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    /// The wrapper forwards to `System` and counts only while on. Runs under miri:
    /// `cargo miri test -p tegu-test-support --lib alloc`.
    #[test]
    #[expect(unsafe_code, reason = "calls the allocator's methods directly, as the global allocator's callers do")]
    fn counts_while_on_and_forwards_every_call() {
        let layout = Layout::from_size_align(24, 8).unwrap();
        let (c0, b0) = (COUNT.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
        MODE.fetch_or(GLOBAL, Ordering::SeqCst);
        // SAFETY: a non-zero-size layout; the block is written within its size, grown with
        // `realloc` to 48 bytes and freed with the layout of that size.
        unsafe {
            let p = Counting.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 24);
            let q = Counting.realloc(p, layout, 48);
            assert_eq!(*q.add(23), 7, "realloc keeps the contents");
            Counting.dealloc(q, Layout::from_size_align(48, 8).unwrap());
        }
        MODE.fetch_and(!GLOBAL, Ordering::SeqCst);
        // Other tests of this binary may allocate meanwhile: at least ours were counted.
        assert!(COUNT.load(Ordering::SeqCst) - c0 >= 2);
        assert!(BYTES.load(Ordering::SeqCst) - b0 >= 72);
        let before = COUNT.load(Ordering::SeqCst);
        // SAFETY: as above, switched off.
        unsafe {
            let p = Counting.alloc(layout);
            Counting.dealloc(p, layout);
        }
        assert_eq!(COUNT.load(Ordering::SeqCst), before, "off: nothing counted");
    }

    /// Per thread: what this thread allocates is counted, another thread's is not.
    #[test]
    fn counts_this_thread_only() {
        let n = count_on_this_thread(|| {
            let boxes: Vec<Box<u64>> = (0..5).map(Box::new).collect();
            std::thread::scope(|s| {
                s.spawn(|| drop(vec![0u8; 64]));
            });
            drop(boxes);
        });
        // The five boxes and the vector holding them; the scoped thread's allocations (and
        // its spawn's, on this thread) do not make it less.
        assert!(n >= 6, "{n}");
        assert_eq!(count_on_this_thread(|| ()), 0);
    }
}
