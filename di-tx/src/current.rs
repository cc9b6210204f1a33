//! Which transaction is current: those of a task's `#[transactional]` methods in progress (a
//! task-local list, set around each method's future, so that the methods it calls, awaited in
//! it on the same task, join them), then the context scope's.

use std::future::Future;
use std::sync::Arc;

use di_core::{ContextRef, singleton_proto};

use crate::scope::TxScope;
use crate::tx::Tx;

/// The App's transactions: which one is current for a data source. What an adapter asks
/// before it runs a statement (di-sqlx's `Database::conn`), and what the advice
/// [`Transactional`](crate::Transactional) joins. Inject it as `Arc<Transactions>`.
#[singleton_proto]
pub struct Transactions {
    #[inject]
    pub(crate) scope: ContextRef<TxScope>,
}

impl Transactions {
    /// The current transaction of data source `source`: the innermost one of the calling
    /// task's `#[transactional]` methods, else the current scope's (begun by a method before,
    /// and not yet ended). `None` when there is none: the caller works outside any transaction
    /// (each statement committed on its own).
    pub fn current(&self, source: &str) -> Option<Arc<Tx>> {
        innermost(source).or_else(|| self.scope.built()?.find(source))
    }
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}

/// One method's transaction, and the frames of the methods around it.
struct Frame {
    tx: Arc<Tx>,
    outer: Option<Arc<Frame>>,
}

tokio::task_local! {
    static FRAMES: Option<Arc<Frame>>;
}

/// The innermost transaction of data source `source` among the calling task's methods in
/// progress.
pub(crate) fn innermost(source: &str) -> Option<Arc<Tx>> {
    FRAMES
        .try_with(|frames| {
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if f.tx.source() == source {
                    return Some(Arc::clone(&f.tx));
                }
                frame = f.outer.as_ref();
            }
            None
        })
        .ok()
        .flatten()
}

/// `fut` with `tx` as its task's innermost transaction of `tx`'s data source.
pub(crate) async fn within<F: Future>(tx: Arc<Tx>, fut: F) -> F::Output {
    let outer = FRAMES.try_with(Clone::clone).ok().flatten();
    FRAMES.scope(Some(Arc::new(Frame { tx, outer })), fut).await
}
