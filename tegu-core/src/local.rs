//! A task-local that moves nothing: a thread-local pointer to a value its future owns, set for
//! the length of each poll and restored after it (also when the poll unwinds). Floor 0.
//!
//! `tokio::task_local!` moves the whole value into its thread-local at the start of every poll
//! and back out at the end: for the scope's handle, more than the rest of the scope's entry and
//! exit (measured in `docs/decisions.md`). `tracing` keeps the current span
//! the same way as here (a thread-local set on enter, restored on exit). See
//! `docs/decisions.md`, "A scope owned by its task".

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::LocalKey;

/// The current value of a [`Local`] on this thread: a pointer to it, null outside any.
pub(crate) type Slot<T> = Cell<*const T>;

/// Outside any value of the local.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outside;

/// A task-local reached through `key`, a `thread_local!` [`Slot`] (declared `const`, so that
/// a read is one load with no lazy initialisation).
pub(crate) struct Local<T: 'static> {
    key: &'static LocalKey<Slot<T>>,
}

impl<T: 'static> Local<T> {
    pub(crate) const fn new(key: &'static LocalKey<Slot<T>>) -> Self {
        Local { key }
    }

    /// Calls `f` with the current value, if there is one.
    #[inline]
    pub(crate) fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, Outside> {
        let current = self.key.with(Cell::get);
        if current.is_null() {
            return Err(Outside);
        }
        // SAFETY: the slot is non-null only while an `enter` of this thread runs: set there from
        // a `&T` borrowed for the whole call, and restored before the call returns, unwinding
        // included (`Restore`). Entries nest on a thread, so the value pointed to is the
        // innermost entry's, alive and not moved (it is borrowed) until that entry ends, which
        // is after `f` returns: `f` cannot keep the reference (`R` does not borrow from it).
        // Only shared references are made, and `T`'s own cells guard its mutation.
        // The other `unsafe` code of tegu-core: `erased` (two casts back to an own type) and
        // `proto::registered` (the link section's bounds); measured reason in the module docs.
        #[expect(
            unsafe_code,
            reason = "a thread's current value, lent for the call: measured reason in the module docs"
        )]
        let value = unsafe { &*current };
        Ok(f(value))
    }

    /// Runs `f` with `value` as the current value on this thread.
    #[inline]
    pub(crate) fn enter<R>(&'static self, value: &T, f: impl FnOnce() -> R) -> R {
        struct Restore<T: 'static> {
            key: &'static LocalKey<Slot<T>>,
            before: *const T,
        }
        impl<T> Drop for Restore<T> {
            fn drop(&mut self) {
                self.key.with(|slot| slot.set(self.before));
            }
        }
        let before = self.key.with(|slot| slot.replace(value));
        let _restore = Restore { key: self.key, before };
        f()
    }
}

pin_project_lite::pin_project! {
    /// `fut` run with `value` as the current value of `local` for each of its polls, and for
    /// its drop; the value is kept (and can be taken back) after `fut` completes.
    pub(crate) struct Scoped<T: 'static, F> {
        local: &'static Local<T>,
        value: Option<T>,
        #[pin]
        fut: Option<F>,
    }

    impl<T: 'static, F> PinnedDrop for Scoped<T, F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // The future is dropped inside its scope, as tokio's task-local future does: a
            // `Drop` of what it holds may read the scope.
            drop_inside(this.local, this.value.as_ref(), this.fut);
        }
    }
}

impl<T: 'static, F> Scoped<T, F> {
    pub(crate) fn new(local: &'static Local<T>, value: T, fut: F) -> Self {
        Scoped { local, value: Some(value), fut: Some(fut) }
    }

    /// Takes the value back (the future, if not done, is dropped first, inside the scope);
    /// `None` if it was taken before.
    pub(crate) fn take_value(self: Pin<&mut Self>) -> Option<T> {
        let this = self.project();
        drop_inside(this.local, this.value.as_ref(), this.fut);
        this.value.take()
    }
}

/// Drops `fut` (if not done) with `value` current.
fn drop_inside<T: 'static, F>(local: &'static Local<T>, value: Option<&T>, mut fut: Pin<&mut Option<F>>) {
    let live = fut.as_ref().as_pin_ref().is_some();
    match value {
        Some(value) if live => local.enter(value, || fut.set(None)),
        _ => fut.set(None),
    }
}

impl<T: 'static, F: Future> Future for Scoped<T, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        let value = this.value.as_ref().expect("a scoped future polled after its value was taken");
        this.local.enter(value, || {
            let fut = this.fut.as_mut().as_pin_mut().expect("a scoped future polled after completion");
            let poll = fut.poll(cx);
            if poll.is_ready() {
                // Dropped inside the scope, as on cancellation.
                this.fut.set(None);
            }
            poll
        })
    }
}

#[cfg(test)]
mod tests {
    //! Run under miri too: `cargo miri test -p tegu-core --lib local`.

    use std::cell::Cell;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::{Local, Scoped, Slot};

    std::thread_local! {
        static SLOT: Slot<Cell<u32>> = const { Cell::new(std::ptr::null()) };
    }
    static LOCAL: Local<Cell<u32>> = Local::new(&SLOT);

    fn read() -> Option<u32> {
        LOCAL.try_with(Cell::get).ok()
    }

    #[test]
    fn entries_nest_and_restore_on_return_and_on_unwind() {
        assert_eq!(read(), None);
        let (outer, inner) = (Cell::new(1), Cell::new(2));
        LOCAL.enter(&outer, || {
            assert_eq!(read(), Some(1));
            LOCAL.enter(&inner, || {
                LOCAL.try_with(|v| v.set(3)).unwrap();
                assert_eq!(read(), Some(3));
            });
            assert_eq!(read(), Some(1));
            let unwound = std::panic::catch_unwind(|| LOCAL.enter(&Cell::new(9), || panic!("in the entry")));
            assert!(unwound.is_err());
            assert_eq!(read(), Some(1), "restored by the unwind");
        });
        assert_eq!((read(), inner.get()), (None, 3));
    }

    /// A future that reads the local at each poll and yields once; on drop, reads it again.
    struct Probe<'a> {
        polls: u32,
        seen: &'a Cell<Vec<Option<u32>>>,
    }

    impl Future for Probe<'_> {
        type Output = u32;
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            let mut seen = self.seen.take();
            seen.push(read());
            self.seen.set(seen);
            self.polls += 1;
            if self.polls == 1 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.polls)
        }
    }

    impl Drop for Probe<'_> {
        fn drop(&mut self) {
            let mut seen = self.seen.take();
            seen.push(read());
            self.seen.set(seen);
        }
    }

    #[test]
    fn a_scoped_future_sees_its_value_in_each_poll_and_its_drop_and_gives_it_back() {
        let mut cx = Context::from_waker(Waker::noop());
        let seen = Cell::new(Vec::new());
        let mut scoped = pin!(Scoped::new(&LOCAL, Cell::new(7), Probe { polls: 0, seen: &seen }));
        assert!(scoped.as_mut().poll(&mut cx).is_pending());
        assert_eq!(read(), None, "not between polls");
        assert_eq!(scoped.as_mut().poll(&mut cx), Poll::Ready(2));
        assert_eq!(seen.take(), [Some(7), Some(7), Some(7)], "two polls, then the drop at completion");
        assert_eq!(scoped.as_mut().take_value().map(|v| v.get()), Some(7));
        assert!(scoped.as_mut().take_value().is_none());

        // Dropped before completion: the future's drop still runs inside the scope.
        let seen = Cell::new(Vec::new());
        {
            let mut scoped = pin!(Scoped::new(&LOCAL, Cell::new(8), Probe { polls: 0, seen: &seen }));
            assert!(scoped.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(seen.take(), [Some(8), Some(8)]);
        assert_eq!(read(), None);
    }
}
