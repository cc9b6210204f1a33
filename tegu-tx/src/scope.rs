//! The context scope's transactions: the request's unit of work, one transaction per data
//! source, committed in the completion phase.

use std::sync::Arc;
use std::sync::Mutex as SyncMutex;

use tegu_core::context_proto;

use crate::error::TxError;
use crate::source::TxSource;
use crate::tx::Tx;

/// The transactions a scope's `required` methods began: committed by the completion hook if
/// the scope has not failed ([`tegu_core::scope::scope_failed`]), rolled back otherwise, and rolled back
/// by the destroy hook if the completion phase did not end them (a panic, a cancelled request).
#[context_proto(complete = complete, destroy = destroy)]
#[derive(Default)]
#[allow(missing_debug_implementations)] // public only to be linked by hand; nothing to show
pub struct TxScope {
    /// Open transactions, in the order they began.
    open: SyncMutex<Vec<Arc<Tx>>>,
    /// Taken while a transaction begins, so that two tasks of the scope do not begin two.
    beginning: tokio::sync::Mutex<()>,
    /// The completion phase has begun: no transaction begins here any more.
    closed: std::sync::atomic::AtomicBool,
    /// The data source of a transaction of the scope that other work of the scope used and
    /// the method that began it rolled back ([`forget`](Self::forget)).
    lost: SyncMutex<Option<String>>,
}

/// How [`TxScope::begin`] went.
pub(crate) enum Began {
    /// A new transaction, the scope's.
    New(Arc<Tx>),
    /// Another task of the scope began one meanwhile: joined.
    Joined(Arc<Tx>),
    /// The completion phase has begun (work after the response): the method needs its own.
    Closed,
}

impl TxScope {
    /// The scope's open transaction of data source `source`, for work of the scope other than
    /// the methods of the one that began it (a method that joins it, a statement outside any
    /// method, the completion phase): marked shared.
    pub(crate) fn find(&self, source: &str) -> Option<Arc<Tx>> {
        let open = self.open();
        let tx = open.iter().find(|tx| tx.source() == source)?;
        // Under the list's lock, so that `forget` sees every use that found it.
        tx.share();
        Some(Arc::clone(tx))
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Tx>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Begins the scope's transaction of `source` (named `name`), set up as `options` say.
    pub(crate) async fn begin(
        &self,
        source: &dyn TxSource,
        name: &str,
        owner: crate::tx::Owner,
        options: &crate::options::TxOptions,
    ) -> Result<Began, TxError> {
        let _one_at_a_time = self.beginning.lock().await;
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(Began::Closed);
        }
        if let Some(tx) = self.find(name) {
            return Ok(Began::Joined(tx));
        }
        let tx = Tx::begin(source, name, owner, options).await?;
        self.open().push(Arc::clone(&tx));
        Ok(Began::New(tx))
    }

    /// Takes `tx` out of the scope (the method that began it failed, panicked or was
    /// cancelled; it rolls `tx` back): the next method begins another. If other work of the
    /// scope found it first (a method of another task that joined it and returned `Ok`, a
    /// statement outside any method, the completion phase's `before_commit` handlers and outbox
    /// write for the events the scope holds), that work goes with it, and the completion phase
    /// fails rather than commit without it. (A transaction the phase took already fails its
    /// commit instead.)
    pub(crate) fn forget(&self, tx: &Arc<Tx>) {
        let mut open = self.open();
        open.retain(|t| !Arc::ptr_eq(t, tx));
        // Under the list's lock, with `find`: a use that found `tx` is marked by now, and a
        // later one does not find it. Set before `close` can take the list, so the completion
        // phase sees it.
        if tx.is_shared() {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            lost.get_or_insert_with(|| tx.source().to_owned());
        }
    }

    /// Closes the scope to new transactions and takes the open ones. Under the beginning's
    /// lock: a transaction being begun is taken too, or sees the scope closed.
    async fn close(&self) -> Vec<Arc<Tx>> {
        let _one_at_a_time = self.beginning.lock().await;
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        std::mem::take(&mut *self.open())
    }

    /// The completion hook: commits, in the order they began, unless the scope failed; after
    /// a failed commit, or a transaction other work of the scope used rolled back by the method
    /// that began it ([`forget`](Self::forget)), rolls back the rest and fails the
    /// scope (tegu-http answers 500).
    async fn complete(&self) -> Result<(), TxError> {
        let txs = self.close().await;
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut result = match lost {
            Some(data_source) => Err(TxError::Ended {
                data_source,
                how: "rolled back: the method that began it failed, after other work of the request used it",
            }),
            None => Ok(()),
        };
        let failed = tegu_core::scope::scope_failed();
        for tx in txs {
            if failed || result.is_err() {
                tx.rollback().await;
            } else {
                result = tx.finish().await;
            }
        }
        if let Err(error) = &result {
            tracing::error!(%error, "committing the scope's transaction failed; the scope fails");
        }
        result
    }

    /// The destroy hook: rolls back what the completion phase did not end.
    async fn destroy(&self) {
        for tx in self.close().await {
            tx.rollback().await;
        }
    }
}
