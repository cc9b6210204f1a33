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
    /// scope's (begun by a method before, and not yet ended). `None` when there is none, or
    /// the innermost method is `never`: the caller works outside any transaction (each
    /// statement committed on its own).
    ///
    /// A method keeps the transaction it began or joined until it returns, ended or not: once
    /// it is rolled back (another method of the request that shares it failed), its next use
    /// is an error, never a statement outside any transaction.
    pub fn current(&self, source: &str) -> Option<Arc<Tx>> {
        match innermost(self.owner, source) {
            Innermost::Tx(tx) => Some(tx),
            Innermost::Outside => None,
            Innermost::None => self.scope.built()?.find(source),
        }
    }
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}

/// One method's transaction (and its savepoint, for a `nested` method), or a `never` method's
/// none, and the frames of the methods around it.
struct Frame {
    owner: Owner,
    at: At,
    savepoint: Option<u32>,
    outer: Option<Arc<Frame>>,
}

/// What a frame's method runs in.
enum At {
    /// A transaction it began or joined.
    Tx(Arc<Tx>),
    /// No transaction of this data source (a `never` method): none it finds meanwhile is its.
    Outside(Arc<str>),
}

impl At {
    fn source(&self) -> &str {
        match self {
            At::Tx(tx) => tx.source(),
            At::Outside(source) => source,
        }
    }

    fn is(&self, tx: &Tx) -> bool {
        matches!(self, At::Tx(t) if std::ptr::eq(&**t, tx))
    }
}

/// What the calling task's methods in progress say of a data source ([`innermost`]).
pub(crate) enum Innermost {
    /// The innermost method runs in this transaction.
    Tx(Arc<Tx>),
    /// The innermost method runs with no transaction (`never`).
    Outside,
    /// No method of the task names the data source.
    None,
}

tokio::task_local! {
    static FRAMES: Option<Arc<Frame>>;
}

/// What a task spawned in a method (`tegu_core::spawn`, `spawn_blocking`) carries: the frames
/// of the methods in progress, so that it is part of their work (its statements run in their
/// transactions, within their savepoints), counted as running in each of those transactions
/// until it ends (their commits wait for it).
struct Carried {
    frames: Arc<Frame>,
    _running: Vec<crate::tx::Active>,
}

tegu_core::__private::inventory::submit! {
    tegu_core::__private::Carrier { capture: carry, enter: |value, f| match value.downcast_ref::<Carried>() {
        Some(carried) => FRAMES.sync_scope(Some(Arc::clone(&carried.frames)), f),
        None => f(),
    } }
}

/// The calling task's frames, for a task it spawns.
fn carry() -> Option<tegu_core::__private::CarriedValue> {
    let frames = FRAMES.try_with(Clone::clone).ok().flatten()?;
    let mut running: Vec<crate::tx::Active> = Vec::new();
    let mut frame = Some(&frames);
    while let Some(f) = frame {
        if let At::Tx(tx) = &f.at
            && !running.iter().any(|r| r.is(tx))
        {
            running.push(tx.enter());
        }
        frame = f.outer.as_ref();
    }
    Some(Arc::new(Carried { frames, _running: running }))
}

/// The innermost transaction of data source `source` of owner `owner` among the calling
/// task's methods in progress, or the innermost method's word that it runs outside any.
pub(crate) fn innermost(owner: Owner, source: &str) -> Innermost {
    FRAMES
        .try_with(|frames| {
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if f.owner == owner && f.at.source() == source {
                    return match &f.at {
                        At::Tx(tx) => Innermost::Tx(Arc::clone(tx)),
                        At::Outside(_) => Innermost::Outside,
                    };
                }
                frame = f.outer.as_ref();
            }
            Innermost::None
        })
        .unwrap_or(Innermost::None)
}

/// The savepoints of `tx` that the calling task's methods in progress hold, innermost first:
/// those whose statements may run while they are set.
pub(crate) fn savepoints_of(tx: &Tx) -> Vec<u32> {
    FRAMES
        .try_with(|frames| {
            let mut held = Vec::new();
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if let Some(savepoint) = f.savepoint.filter(|_| f.at.is(tx)) {
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
                count += usize::from(f.at.is(tx));
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
    FRAMES.scope(Some(Arc::new(Frame { owner, at: At::Tx(tx), savepoint, outer })), fut).await
}

/// `fut` with no transaction of data source `source` as its task's innermost: what a `never`
/// method runs in, whatever another task of the scope begins meanwhile.
pub(crate) async fn outside<F: Future>(owner: Owner, source: &str, fut: F) -> F::Output {
    let outer = FRAMES.try_with(Clone::clone).ok().flatten();
    let frame = Frame { owner, at: At::Outside(source.into()), savepoint: None, outer };
    FRAMES.scope(Some(Arc::new(frame)), fut).await
}
