//! Which transaction is current: those of a task's `#[transactional]` methods in progress (a
//! task-local list, set around each method's future, so that the methods it calls, awaited in
//! it on the same task, use them), then the context scope's.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tegu_core::{ContextRef, singleton_proto};

use crate::scope::TxScope;
use crate::tx::Tx;

/// The App's transactions: which one is current for a data source. What an adapter asks
/// before it runs a statement (tegu-sqlx's `Database::conn`), and what the advice
/// [`Transactional`](crate::Transactional) joins. Inject it as `Arc<Transactions>`.
#[singleton_proto]
pub struct Transactions {
    #[inject]
    pub(crate) scope: ContextRef<TxScope>,
    /// Tells this App's transactions from another's of the same data source name, when a
    /// task runs the methods of two Apps.
    pub(crate) owner: Owner,
}

/// A number per [`Transactions`], unique in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner(u64);

impl Default for Owner {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Owner(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Transactions {
    /// The current transaction of data source `source`: the innermost one of the calling
    /// task's `#[transactional]` methods (the one it began or joined), else the current
    /// scope's (begun by a method before, and not yet ended). `None` when there is none: the
    /// caller works outside any transaction (each statement committed on its own).
    ///
    /// A method keeps the transaction it began or joined until it returns, ended or not: once
    /// it is rolled back (another method of the request that shares it failed), its next use
    /// is an error, never a statement outside any transaction.
    pub fn current(&self, source: &str) -> Option<Arc<Tx>> {
        innermost(self.owner, source).or_else(|| self.scope.built()?.find(source))
    }
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}

/// One method's transaction (and its savepoint, for a `nested` method), and the frames of the
/// methods around it.
struct Frame {
    owner: Owner,
    tx: Arc<Tx>,
    savepoint: Option<u32>,
    outer: Option<Arc<Frame>>,
}

tokio::task_local! {
    static FRAMES: Option<Arc<Frame>>;
}

/// The innermost transaction of data source `source` of owner `owner` among the calling
/// task's methods in progress.
pub(crate) fn innermost(owner: Owner, source: &str) -> Option<Arc<Tx>> {
    FRAMES
        .try_with(|frames| {
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if f.owner == owner && f.tx.source() == source {
                    return Some(Arc::clone(&f.tx));
                }
                frame = f.outer.as_ref();
            }
            None
        })
        .ok()
        .flatten()
}

/// The savepoints of `tx` that the calling task's methods in progress hold, innermost first:
/// those whose statements may run while they are set.
pub(crate) fn savepoints_of(tx: &Tx) -> Vec<u32> {
    FRAMES
        .try_with(|frames| {
            let mut held = Vec::new();
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if let Some(savepoint) = f.savepoint.filter(|_| std::ptr::eq(&*f.tx, tx)) {
                    held.push(savepoint);
                }
                frame = f.outer.as_ref();
            }
            held
        })
        .unwrap_or_default()
}

/// How many frames of the calling task hold `tx`.
pub(crate) fn frames_of(tx: &Tx) -> usize {
    FRAMES
        .try_with(|frames| {
            let (mut count, mut frame) = (0, frames.as_ref());
            while let Some(f) = frame {
                count += usize::from(std::ptr::eq(&*f.tx, tx));
                frame = f.outer.as_ref();
            }
            count
        })
        .unwrap_or(0)
}

/// `fut` with `tx` (and its `savepoint`, for a `nested` method) as its task's innermost
/// transaction of `tx`'s data source, counted as a method running in `tx` until it ends.
pub(crate) async fn within<F: Future>(owner: Owner, tx: Arc<Tx>, savepoint: Option<u32>, fut: F) -> F::Output {
    let _running = tx.enter();
    let outer = FRAMES.try_with(Clone::clone).ok().flatten();
    FRAMES.scope(Some(Arc::new(Frame { owner, tx, savepoint, outer })), fut).await
}
