//! A count of things still running (a scope's background tasks, an App's ending scopes) that
//! someone can wait to reach zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Pending {
    /// The count, and [`CLOSED`] once [`close_when_idle`](Pending::close_when_idle) or
    /// [`close`](Pending::close) ran.
    count: AtomicUsize,
    done: Notify,
}

/// Set in the count once closed: [`PendingGuard::try_new`] refuses from then on.
const CLOSED: usize = 1 << (usize::BITS - 1);

impl Pending {
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire) & !CLOSED
    }

    /// Closes the count if it is zero now; whether it did (or was closed already).
    pub(crate) fn close_when_idle(&self) -> bool {
        match self.count.compare_exchange(0, CLOSED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(now) => now & CLOSED != 0,
        }
    }

    /// Closes the count, whatever it is.
    pub(crate) fn close(&self) {
        self.count.fetch_or(CLOSED, Ordering::AcqRel);
    }

    /// Waits until the count is zero, at most `timeout`; `false` if it was not. Needs tokio's
    /// time driver only when there is something to wait for.
    pub(crate) async fn wait(&self, timeout: Duration) -> bool {
        if self.count() == 0 {
            return true;
        }
        tokio::time::timeout(timeout, self.idle()).await.is_ok()
    }

    /// Waits until the count is zero, however long that takes.
    async fn idle(&self) {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Counts one more, closed or not ([`PendingGuard::new`]).
    fn acquire(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts one off, waking the waiters when the count reaches zero (a guard's drop).
    fn release(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) & !CLOSED == 1 {
            self.done.notify_waiters();
        }
    }
}

/// One thing counted by the [`Pending`] of its owner, which it keeps alive.
pub(crate) struct PendingGuard<O: AsRef<Pending>>(Arc<O>);

impl<O: AsRef<Pending>> PendingGuard<O> {
    /// Counts one more, closed or not: what must end (a scope's destroy hooks) is always
    /// counted.
    pub(crate) fn new(owner: Arc<O>) -> Self {
        (*owner).as_ref().acquire();
        PendingGuard(owner)
    }

    /// Counts one more unless the count is closed: what may be refused (an event handler, a
    /// scheduled run) once its owner has stopped waiting.
    pub(crate) fn try_new(owner: Arc<O>) -> Option<Self> {
        let count = &(*owner).as_ref().count;
        let mut now = count.load(Ordering::Acquire);
        loop {
            if now & CLOSED != 0 {
                return None;
            }
            match count.compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(PendingGuard(owner)),
                Err(actual) => now = actual,
            }
        }
    }
}

impl<O: AsRef<Pending>> Drop for PendingGuard<O> {
    fn drop(&mut self) {
        (*self.0).as_ref().release();
    }
}
