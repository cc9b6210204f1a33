//! `Transactional`: the advice `#[transactional]` runs around a method.

use std::sync::Arc;

use tegu_core::{
    Keyed,
    advice::{Advice, Call, Next},
    events::EventHold,
    singleton_proto,
};

use crate::current::Transactions;
use crate::error::TxError;
use crate::options::{Propagation, TxOptions};
use crate::scope::Began;
use crate::source::TxSource;
use crate::tx::{Owner, Tx, frames_of, outside, within};

/// The advice of `#[transactional]`: runs a method returning `Result<T, E>` (with
/// `E: From<TxError>`) in a transaction of the App's data source, as its [`TxOptions`] say.
/// Registered with every App that links tegu-tx.
///
/// See the [crate documentation](crate) for the rules and an example.
#[singleton_proto]
pub struct Transactional {
    /// The data sources (singletons providing `dyn TxSource`), by object name.
    #[inject]
    sources: Keyed<dyn TxSource>,
    #[inject]
    transactions: Arc<Transactions>,
}

impl std::fmt::Debug for Transactional {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactional").field("sources", &self.sources.names().collect::<Vec<_>>()).finish()
    }
}

impl Transactional {
    /// The data source `options` name for `call`, and its name.
    fn source<'a>(&'a self, call: Call, options: &TxOptions) -> Result<(&'a str, Arc<dyn TxSource>), TxError> {
        let fail = |why: String| TxError::Source { call: call.to_string(), why };
        let known = || {
            let names: Vec<String> = self.sources.names().map(|n| format!("`{n}`")).collect();
            if names.is_empty() { "it has none".to_owned() } else { format!("it has {}", names.join(", ")) }
        };
        let name = match options.source_name() {
            Some(name) => match self.sources.names().find(|n| *n == name) {
                Some(name) => name,
                None => return Err(fail(format!("its data source `{name}` is not in this App ({})", known()))),
            },
            None => {
                let mut names = self.sources.names();
                match (names.next(), names.next()) {
                    (Some(name), None) => name,
                    (None, _) => {
                        return Err(fail(
                            "this App has no data source: register one that provides `dyn tegu_tx::TxSource` (tegu-sqlx's `Database`)".to_owned(),
                        ));
                    }
                    _ => {
                        return Err(fail(format!(
                            "this App has several data sources ({}): name one with `#[transactional(source = \"...\")]`",
                            known()
                        )));
                    }
                }
            }
        };
        let source = self.sources.get(name).map_err(|e| fail(e.to_string()))?;
        Ok((name, source))
    }

    /// `required` without a current transaction: the scope's, begun now, if the scope's
    /// completion phase has not begun; else (work after the response) one of the method's own.
    async fn required<T, E: From<TxError>>(
        &self,
        source: &dyn TxSource,
        name: &str,
        next: Next<'_, Result<T, E>>,
    ) -> Result<T, E> {
        let owner = self.transactions.owner;
        let Ok(scope) = self.transactions.scope.try_get() else { return own(owner, source, name, next).await };
        let tx = match scope.begin(source, name, owner).await? {
            Began::New(tx) => tx,
            Began::Joined(tx) => return in_tx(tx, next).await,
            Began::Closed => return own(owner, source, name, next).await,
        };
        // Cut short (a panic, a cancellation): what it began is never committed.
        let cut = OnDrop(Some(|| {
            tx.doom();
            scope.forget(&tx);
        }));
        let out = in_tx(Arc::clone(&tx), next).await;
        std::mem::forget(cut);
        // On `Err`, rolled back, with the events emitted in it; on `Ok`, the scope commits it.
        if out.is_err() {
            scope.forget(&tx);
            tx.rollback().await;
        }
        out
    }
}

impl<T: Send, E: From<TxError> + Send> Advice<Result<T, E>> for Transactional {
    async fn around(&self, call: Call, next: Next<'_, Result<T, E>>) -> Result<T, E> {
        let options = call.params::<TxOptions>().copied().unwrap_or_default();
        let (name, source) = self.source(call, &options)?;
        let owner = self.transactions.owner;
        let current = self.transactions.current(name);
        match (options.propagation(), current) {
            // Joined: the method keeps the transaction until it returns, ended or not.
            (Propagation::Required | Propagation::Mandatory, Some(tx)) => in_tx(tx, next).await,
            (Propagation::Never, None) => outside(owner, name, next.run()).await,
            (Propagation::Required, None) => self.required(&*source, name, next).await,
            (Propagation::RequiresNew, Some(_)) if source.one_at_a_time() => {
                Err(TxError::OneAtATime { call: call.to_string(), data_source: name.to_owned() }.into())
            }
            (Propagation::RequiresNew, _) => own(owner, &*source, name, next).await,
            (Propagation::Nested, Some(tx)) => nested(tx, next).await,
            (Propagation::Nested, None) => self.required(&*source, name, next).await,
            (Propagation::Mandatory, None) => {
                Err(TxError::Mandatory { call: call.to_string(), data_source: name.to_owned() }.into())
            }
            (Propagation::Never, Some(_)) => {
                Err(TxError::Never { call: call.to_string(), data_source: name.to_owned() }.into())
            }
        }
    }
}

/// The method run in `tx`, which it began or joined: the innermost transaction of its task.
/// The transaction holds the events it emits, unless the method joined it through a method of
/// its task (or the task's spawner) already in it: then the events go where that method's go
/// (a `nested` method's savepoint holds them, to follow it).
async fn in_tx<T, E>(tx: Arc<Tx>, next: Next<'_, Result<T, E>>) -> Result<T, E> {
    if frames_of(&tx) > 0 {
        return within(tx.owner, Arc::clone(&tx), None, next.run()).await;
    }
    within(tx.owner, Arc::clone(&tx), None, tx.events.run(next.run())).await
}

/// A transaction of the method's own: begun now, the innermost of the task while the method
/// runs, committed on `Ok` (a failed commit is the method's error), rolled back on `Err`, never
/// committed if the method is cut short. The events emitted in it follow it: their
/// `before_commit` handlers and the outbox's write run in it before its commit, and their
/// other handlers once it has committed or rolled back. Once the method has returned `Ok`, its
/// commit runs on a task of the scope's: a caller that goes away does not cut it at an unknown
/// point, nor release the events as rolled back.
async fn own<T, E: From<TxError>>(
    owner: Owner,
    source: &dyn TxSource,
    name: &str,
    next: Next<'_, Result<T, E>>,
) -> Result<T, E> {
    let tx = Tx::begin(source, name, owner).await?;
    let cut = OnDrop(Some(|| tx.doom()));
    let out = in_tx(Arc::clone(&tx), next).await;
    std::mem::forget(cut);
    let value = match out {
        Ok(value) => value,
        Err(error) => {
            tx.rollback().await;
            return Err(error);
        }
    };
    let finishing = Arc::clone(&tx);
    let finished = match tokio::runtime::Handle::try_current() {
        Ok(_) => match tegu_core::spawn(async move { finishing.finish().await }).await {
            Ok(finished) => finished,
            Err(cut) if cut.is_panic() => std::panic::resume_unwind(cut.into_panic()),
            Err(_) => Err(TxError::Ended { data_source: name.to_owned(), how: "its commit was cut off" }),
        },
        Err(_) => finishing.finish().await,
    };
    finished?;
    Ok(value)
}

/// A savepoint of the current transaction around the method: released on `Ok`, rolled back to
/// on `Err`, and rolled back to before the transaction's next use if the method is cut short
/// (also while its savepoint is being ended). Its events go to the unit around it (an outer
/// savepoint, else the transaction) once the savepoint is released, and to their
/// `after_rollback` handlers if it is rolled back to.
async fn nested<T, E: From<TxError>>(tx: Arc<Tx>, next: Next<'_, Result<T, E>>) -> Result<T, E> {
    let savepoint = tx.savepoint().await?;
    let cut = OnDrop(Some(|| tx.abandon(savepoint)));
    let events = EventHold::new();
    let out = within(tx.owner, Arc::clone(&tx), Some(savepoint), events.run(next.run())).await;
    let ended = tx.end_savepoint(savepoint, out.is_ok()).await;
    std::mem::forget(cut);
    if out.is_ok() && ended.is_ok() {
        // To the unit around the method: an outer savepoint's hold, else the transaction's.
        events.hand_on(&tx.events);
    } else {
        events.release(false);
    }
    ended?;
    out
}

/// Runs its closure when dropped: what a method cut short (a panic unwinding through its
/// advice, its future dropped) leaves to do. Forgotten when the method returns.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
