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
    /// The data source of a transaction of the scope that the method that began it rolled
    /// back after the completion phase had begun (and had perhaps prepared events in it).
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
    /// The scope's open transaction of data source `source`.
    pub(crate) fn find(&self, source: &str) -> Option<Arc<Tx>> {
        self.open().iter().find(|tx| tx.source() == source).cloned()
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Tx>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Begins the scope's transaction of `source` (named `name`).
    pub(crate) async fn begin(
        &self,
        source: &dyn TxSource,
        name: &str,
        owner: crate::current::Owner,
    ) -> Result<Began, TxError> {
        let _one_at_a_time = self.beginning.lock().await;
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(Began::Closed);
        }
        if let Some(tx) = self.find(name) {
            return Ok(Began::Joined(tx));
        }
        let tx = Tx::begin(source, name, owner).await?;
        self.open().push(Arc::clone(&tx));
        Ok(Began::New(tx))
    }

    /// Takes `tx` out of the scope (the method that began it failed, and rolls it back): the
    /// next method begins another. Once the completion phase has begun, it may have prepared
    /// the events the scope holds in `tx` (their `before_commit` handlers' writes, the
    /// outbox's): the phase then fails, rather than commit without them and call them
    /// committed. (Taken by the phase already, `tx`'s commit fails instead.)
    pub(crate) fn forget(&self, tx: &Arc<Tx>) {
        let mut open = self.open();
        let before = open.len();
        open.retain(|t| !Arc::ptr_eq(t, tx));
        if open.len() < before && tegu_core::__private::completion_begun() {
            // Under the list's lock: `close` takes the list after this, and sees the mark.
            *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx.source().to_owned());
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
    /// a failed commit, or a transaction the phase may have prepared events in rolled back by
    /// the method that began it ([`forget`](Self::forget)), rolls back the rest and fails the
    /// scope (tegu-http answers 500).
    async fn complete(&self) -> Result<(), TxError> {
        let txs = self.close().await;
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut result = match lost {
            Some(data_source) => Err(TxError::Ended {
                data_source,
                how: "rolled back: the method that began it failed after the completion phase had begun",
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
