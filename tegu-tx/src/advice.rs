//! `Transactional`: the advice `#[transactional]` runs around a method.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use tegu_core::{
    Keyed,
    advice::{Advice, Call, Next},
    events::EventHold,
    futures::Run,
    singleton_proto,
};

use crate::current::Transactions;
use crate::error::{ErrorClass, TxError};
use crate::options::{Propagation, Retry, TxOptions};
use crate::rules::ruled;
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
        call: Call,
        options: &TxOptions,
        next: &mut Next<'_, Result<T, E>>,
    ) -> Result<T, E> {
        let owner = self.transactions.owner;
        let Ok(scope) = self.transactions.scope.try_get() else {
            return own(owner, source, name, call, options, next).await.0;
        };
        let deadline = options.timeout_after().map(|after| Instant::now() + after);
        let began = by(deadline, scope.begin(source, name, owner, options)).await;
        let tx = match began {
            Some(Ok(Began::New(tx))) => tx,
            // Joined: its rule's word is its own (the cell scoped), and decides nothing.
            Some(Ok(Began::Joined(tx))) => return in_tx(tx, ruled(options, start(next))).await.0,
            Some(Ok(Began::Closed)) => return own(owner, source, name, call, options, next).await.0,
            Some(Err(error)) => return Err(error.into()),
            None => return Err(timed_out(call, name, options).into()),
        };
        // Cut short (a panic, a cancellation): what it began is never committed.
        let cut = OnDrop(Some(|| {
            tx.doom();
            scope.forget(&tx);
        }));
        let ran = by(deadline, in_tx(Arc::clone(&tx), ruled(options, start(next)))).await;
        std::mem::forget(cut);
        let Some((out, commit_anyway)) = ran else {
            next.cancel();
            tx.doom();
            scope.forget(&tx);
            tx.rollback().await;
            return Err(timed_out(call, name, options).into());
        };
        // On `Err`, rolled back, with the events emitted in it (unless a rule keeps it); on
        // `Ok`, the scope commits it.
        if out.is_err() && !commit_anyway {
            scope.forget(&tx);
            tx.rollback().await;
        }
        out
    }
}

impl<T: Send, E: From<TxError> + Send> Advice<Result<T, E>> for Transactional {
    async fn around(&self, call: Call, mut next: Next<'_, Result<T, E>>) -> Result<T, E> {
        let options = call.params::<TxOptions>().copied().unwrap_or_default();
        let (name, source) = self.source(call, &options)?;
        let owner = self.transactions.owner;
        let current = self.transactions.current(name);
        match (options.propagation(), current) {
            // Joined: the method keeps the transaction until it returns, ended or not. A rule of
            // its own decides nothing there: its cell is scoped so that its word stays its own.
            (Propagation::Required | Propagation::Mandatory, Some(tx)) => {
                in_tx(tx, ruled(&options, next.run())).await.0
            }
            (Propagation::Never, None) => outside(owner, name, next.run()).await,
            (Propagation::Required, None) => self.required(&*source, name, call, &options, &mut next).await,
            (Propagation::RequiresNew, Some(_)) if source.one_at_a_time() => {
                Err(TxError::OneAtATime { call: call.to_string(), data_source: name.to_owned() }.into())
            }
            (Propagation::RequiresNew, _) => match options.retries() {
                Some(retry) => retrying(owner, &*source, name, call, &options, retry, &mut next).await,
                None => own(owner, &*source, name, call, &options, &mut next).await.0,
            },
            (Propagation::Nested, Some(tx)) => nested(tx, &options, next.run()).await,
            (Propagation::Nested, None) => self.required(&*source, name, call, &options, &mut next).await,
            (Propagation::Mandatory, None) => {
                Err(TxError::Mandatory { call: call.to_string(), data_source: name.to_owned() }.into())
            }
            (Propagation::Never, Some(_)) => {
                Err(TxError::Never { call: call.to_string(), data_source: name.to_owned() }.into())
            }
        }
    }
}

/// The rest of the call, started: the first run of a `Next` always starts.
fn start<'n, R>(next: &'n mut Next<'_, R>) -> Run<'n, R> {
    next.again().expect("a call's chain runs at least once")
}

/// `fut`'s output, or `None` once `deadline` (if any) has passed: then `fut` is dropped.
async fn by<F: Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// The error of a method whose transaction outlived its timeout.
fn timed_out(call: Call, name: &str, options: &TxOptions) -> TxError {
    TxError::TimedOut {
        call: call.to_string(),
        data_source: name.to_owned(),
        after: options.timeout_after().unwrap_or_default(),
    }
}

/// Whether a failure of this class is worth running the whole transaction again for.
fn conflict(class: ErrorClass) -> Option<ErrorClass> {
    matches!(class, ErrorClass::SerializationFailure | ErrorClass::Deadlock).then_some(class)
}

/// `own` run until it does not fail with a conflict, at most `retry.retries()` more times,
/// each in a new transaction after a wait.
async fn retrying<T, E: From<TxError>>(
    owner: Owner,
    source: &dyn TxSource,
    name: &str,
    call: Call,
    options: &TxOptions,
    retry: Retry,
    next: &mut Next<'_, Result<T, E>>,
) -> Result<T, E> {
    let mut retried = 0;
    loop {
        match own(owner, source, name, call, options, next).await {
            (Err(_), Some(class)) if retried < retry.retries() => {
                retried += 1;
                tracing::info!(%call, data_source = name, retry = retried, ?class, "the transaction conflicted with another; running the method again");
                tokio::time::sleep(retry.wait(retried)).await;
            }
            (out, _) => return out,
        }
    }
}

/// The method run in `tx`, which it began or joined: the innermost transaction of its task.
/// The transaction holds the events it emits, unless the method joined it through a method of
/// its task (or the task's spawner) already in it: then the events go where that method's go
/// (a `nested` method's savepoint holds them, to follow it).
async fn in_tx<R, F: Future<Output = R>>(tx: Arc<Tx>, run: F) -> R {
    if frames_of(&tx) > 0 {
        return within(tx.owner, Arc::clone(&tx), None, run).await;
    }
    within(tx.owner, Arc::clone(&tx), None, tx.events.run(run)).await
}

/// A transaction of the method's own: begun now, the innermost of the task while the method
/// runs, committed on `Ok` (a failed commit is the method's error), rolled back on `Err`
/// (unless a rollback rule keeps it), never committed if the method is cut short or outlives
/// its timeout. The events emitted in it follow it: their `before_commit` handlers and the
/// outbox's write run in it before its commit, and their other handlers once it has committed
/// or rolled back. Once the method has returned, its commit runs on a task of the scope's: a
/// caller that goes away does not cut it at an unknown point, nor release the events as rolled
/// back. With the output, the class of a failure worth a retry (a conflict), if it failed so.
async fn own<T, E: From<TxError>>(
    owner: Owner,
    source: &dyn TxSource,
    name: &str,
    call: Call,
    options: &TxOptions,
    next: &mut Next<'_, Result<T, E>>,
) -> (Result<T, E>, Option<ErrorClass>) {
    let deadline = options.timeout_after().map(|after| Instant::now() + after);
    let tx = match by(deadline, Tx::begin(source, name, owner, options)).await {
        Some(Ok(tx)) => tx,
        Some(Err(error)) => {
            let class = conflict(error.class());
            return (Err(error.into()), class);
        }
        None => return (Err(timed_out(call, name, options).into()), None),
    };
    let cut = OnDrop(Some(|| tx.doom()));
    let ran = by(deadline, in_tx(Arc::clone(&tx), ruled(options, start(next)))).await;
    std::mem::forget(cut);
    let (out, commit_anyway) = match ran {
        Some(ran) => ran,
        None => {
            // What the method left running holds the transaction's connection, maybe.
            next.cancel();
            tx.doom();
            tx.rollback().await;
            return (Err(timed_out(call, name, options).into()), None);
        }
    };
    if out.is_err() && !commit_anyway {
        tx.rollback().await;
        return (out, tx.conflict());
    }
    let finishing = Arc::clone(&tx);
    let finished = match tokio::runtime::Handle::try_current() {
        Ok(_) => match tegu_core::spawn(async move { finishing.finish().await }).await {
            Ok(finished) => finished,
            Err(cut) if cut.is_panic() => std::panic::resume_unwind(cut.into_panic()),
            Err(_) => Err(TxError::Ended { data_source: name.to_owned(), how: "its commit was cut off" }),
        },
        Err(_) => finishing.finish().await,
    };
    match finished {
        Ok(()) => (out, None),
        // Never a commit whose outcome is unknown: its class is not a conflict.
        Err(error) => {
            let class = conflict(error.class());
            (Err(error.into()), class)
        }
    }
}

/// A savepoint of the current transaction around the method: released on `Ok` (or on an
/// `Err` a rollback rule keeps), rolled back to on `Err`, and rolled back to before the
/// transaction's next use if the method is cut short (also while its savepoint is being
/// ended). Its events go to the unit around it (an outer savepoint, else the transaction)
/// once the savepoint is released, and to their `after_rollback` handlers if it is rolled
/// back to.
async fn nested<T, E: From<TxError>>(tx: Arc<Tx>, options: &TxOptions, run: Run<'_, Result<T, E>>) -> Result<T, E> {
    let savepoint = tx.savepoint().await?;
    let cut = OnDrop(Some(|| tx.abandon(savepoint)));
    let events = EventHold::new();
    let (out, commit_anyway) =
        within(tx.owner, Arc::clone(&tx), Some(savepoint), events.run(ruled(options, run))).await;
    let keep = out.is_ok() || commit_anyway;
    let ended = tx.end_savepoint(savepoint, keep).await;
    std::mem::forget(cut);
    if keep && ended.is_ok() {
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
