//! A global allocator that counts allocations while switched on: install it with
//! `#[global_allocator] static A: Counting = Counting;` and read [`measure`].
//!
//! Off, it costs one relaxed load per allocation; on, the counters are shared atomics, so it is
//! switched on only for a sequential phase, never while throughput is measured.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every call is forwarded unchanged to `System`; the counters do not touch memory.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations and bytes allocated while `f` runs (by any thread).
pub async fn measure<F: std::future::Future>(f: F) -> (u64, u64, F::Output) {
    let (c0, b0) = (COUNT.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
    ON.store(true, Ordering::SeqCst);
    let out = f.await;
    ON.store(false, Ordering::SeqCst);
    (COUNT.load(Ordering::SeqCst) - c0, BYTES.load(Ordering::SeqCst) - b0, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrapper forwards to `System` and counts only while on. Runs under miri:
    /// `cargo miri test -p benches --lib alloc`.
    #[test]
    #[allow(unsafe_code)]
    fn counts_while_on_and_forwards_every_call() {
        let layout = Layout::from_size_align(24, 8).unwrap();
        let (c0, b0) = (COUNT.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
        ON.store(true, Ordering::SeqCst);
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
        ON.store(false, Ordering::SeqCst);
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
}
