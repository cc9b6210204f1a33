//! A count of things still running (a scope's background tasks, an App's ending scopes) that
//! someone can wait to reach zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Pending {
    count: AtomicUsize,
    done: Notify,
}

impl Pending {
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until the count is zero, at most `timeout`; `false` if it was not. Needs tokio's
    /// time driver only when there is something to wait for.
    pub(crate) async fn wait(&self, timeout: Duration) -> bool {
        if self.count() == 0 {
            return true;
        }
        let zero = async {
            loop {
                let notified = self.done.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.count() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, zero).await.is_ok()
    }
}

/// One thing counted by the [`Pending`] of its owner, which it keeps alive.
pub(crate) struct PendingGuard<O: AsRef<Pending>>(Arc<O>);

impl<O: AsRef<Pending>> PendingGuard<O> {
    pub(crate) fn new(owner: Arc<O>) -> Self {
        (*owner).as_ref().count.fetch_add(1, Ordering::AcqRel);
        PendingGuard(owner)
    }
}

impl<O: AsRef<Pending>> Drop for PendingGuard<O> {
    fn drop(&mut self) {
        let pending = (*self.0).as_ref();
        if pending.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            pending.done.notify_waiters();
        }
    }
}
