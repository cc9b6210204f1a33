//! One open transaction, shared by the methods that join it.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};

use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use crate::error::TxError;
use crate::source::{TxConn, TxSource};

/// A transaction of a data source: what a `#[transactional]` method begins and the methods it
/// calls join. Its connection is used by one task at a time ([`lock`](Self::lock)).
///
/// Adapters reach it through [`Transactions::current`](crate::Transactions::current); user
/// code through the adapter (di-sqlx's `Database::conn`).
pub struct Tx {
    source: Arc<str>,
    state: Arc<Mutex<State>>,
    /// The method that began it failed, panicked or was cancelled: rolled back at its next use
    /// or at the scope's end, never committed.
    doomed: AtomicBool,
    /// Savepoints of `nested` methods cut short (a panic, a cancellation): rolled back to before
    /// the transaction's next use.
    abandoned: SyncMutex<Vec<String>>,
    savepoints: AtomicU32,
}

/// How a transaction the database rolled back itself ended.
const ABORTED: &str = "rolled back by the database";

/// Where a transaction stands.
pub(crate) enum State {
    Open(Box<dyn TxConn>),
    Ended(&'static str),
}

impl std::fmt::Debug for Tx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx").field("source", &self.source).finish_non_exhaustive()
    }
}

impl Tx {
    /// Begins a transaction of `source`, named `name`.
    pub(crate) async fn begin(source: &dyn TxSource, name: &str) -> Result<Arc<Tx>, TxError> {
        let conn = source.begin().await.map_err(|error| TxError::database("beginning a transaction", name, error))?;
        Ok(Arc::new(Tx {
            source: name.into(),
            state: Arc::new(Mutex::new(State::Open(conn))),
            doomed: AtomicBool::new(false),
            abandoned: SyncMutex::new(Vec::new()),
            savepoints: AtomicU32::new(0),
        }))
    }

    /// The data source's name.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The transaction's connection, for one use (hold it for a statement or a few, not across
    /// a call to another `#[transactional]` method of the same transaction, which waits for it).
    ///
    /// # Errors
    ///
    /// [`TxError::Ended`] once the transaction is over (a method that began it failed: its
    /// work is rolled back now), [`TxError::Aborted`] if the database ended it itself, and a
    /// [`TxError::Database`] if rolling back an abandoned savepoint failed.
    pub async fn lock(&self) -> Result<TxGuard, TxError> {
        let mut state = Arc::clone(&self.state).lock_owned().await;
        self.settle(&mut state).await?;
        Ok(TxGuard {
            inner: OwnedMutexGuard::map(state, |state| match state {
                State::Open(conn) => &mut **conn,
                State::Ended(_) => unreachable!("settled: open"),
            }),
        })
    }

    /// Brings the state up to date before a use: a doomed transaction is rolled back, an
    /// aborted one ended, abandoned savepoints rolled back to. `Ok` if it is open.
    async fn settle(&self, state: &mut State) -> Result<(), TxError> {
        match state {
            State::Ended(ABORTED) => return Err(TxError::Aborted { data_source: self.source.to_string() }),
            State::Ended(how) => return Err(self.ended(how)),
            State::Open(_) => {}
        }
        if self.doomed.load(Ordering::Acquire) {
            self.end(state).await;
            return Err(self.ended("rolled back: the method that began it failed"));
        }
        let State::Open(conn) = state else { unreachable!("checked above") };
        if conn.aborted() {
            tracing::error!(source = %self.source, "the database rolled the transaction back itself; nothing of it is saved");
            // Ended through the adapter, which puts its connection back in order.
            if let State::Open(conn) = std::mem::replace(state, State::Ended(ABORTED))
                && let Err(error) = conn.rollback().await
            {
                tracing::error!(source = %self.source, %error, "ending the transaction the database rolled back failed");
            }
            return Err(TxError::Aborted { data_source: self.source.to_string() });
        }
        let abandoned = std::mem::take(&mut *self.abandoned.lock().unwrap_or_else(|e| e.into_inner()));
        for name in abandoned.iter().rev() {
            let undone = async {
                conn.rollback_to_savepoint(name).await?;
                conn.release_savepoint(name).await
            };
            undone.await.map_err(|error| self.database("rolling back to an abandoned savepoint", error))?;
        }
        Ok(())
    }

    /// Commits (a doomed or aborted transaction is rolled back instead, and that is the error).
    pub(crate) async fn commit(&self) -> Result<(), TxError> {
        let mut state = self.state.lock().await;
        self.settle(&mut state).await?;
        let State::Open(conn) = std::mem::replace(&mut *state, State::Ended("committed")) else {
            unreachable!("settled: open")
        };
        conn.commit().await.map_err(|error| {
            *state = State::Ended("its commit failed");
            self.database("committing", error)
        })
    }

    /// Rolls back if still open; a failure is logged (the transaction is over either way: the
    /// connection goes back with nothing committed).
    pub(crate) async fn rollback(&self) {
        let mut state = self.state.lock().await;
        self.end(&mut state).await;
    }

    async fn end(&self, state: &mut State) {
        if let State::Open(conn) = std::mem::replace(state, State::Ended("rolled back")) {
            if let Err(error) = conn.rollback().await {
                tracing::error!(source = %self.source, %error, "rolling back failed");
            }
        }
    }

    /// Marks the transaction as not to be committed: its next use rolls it back.
    pub(crate) fn doom(&self) {
        self.doomed.store(true, Ordering::Release);
    }

    /// Sets a savepoint for a `nested` method; its name.
    pub(crate) async fn savepoint(&self) -> Result<String, TxError> {
        let name = format!("di_sp_{}", self.savepoints.fetch_add(1, Ordering::Relaxed) + 1);
        let mut conn = self.lock().await?;
        conn.savepoint(&name).await.map_err(|error| self.database("setting a savepoint", error))?;
        Ok(name)
    }

    /// Ends savepoint `name`: released if `keep`, else rolled back to and released.
    pub(crate) async fn end_savepoint(&self, name: &str, keep: bool) -> Result<(), TxError> {
        let mut conn = self.lock().await?;
        if !keep {
            conn.rollback_to_savepoint(name).await.map_err(|e| self.database("rolling back to a savepoint", e))?;
        }
        conn.release_savepoint(name).await.map_err(|e| self.database("releasing a savepoint", e))
    }

    /// A `nested` method holding savepoint `name` was cut short: rolled back to before the next use.
    pub(crate) fn abandon(&self, name: String) {
        self.abandoned.lock().unwrap_or_else(|e| e.into_inner()).push(name);
    }

    fn ended(&self, how: &'static str) -> TxError {
        TxError::Ended { data_source: self.source.to_string(), how }
    }

    fn database(&self, doing: &'static str, error: di_core::BoxError) -> TxError {
        TxError::database(doing, &*self.source, error)
    }
}

impl Drop for Tx {
    /// A transaction dropped open (the method that began it was cut short, and nothing else
    /// holds it) is rolled back through its adapter on a task of its own, where a runtime is at
    /// hand; otherwise its connection is dropped, which rolls back too (sqlx's does).
    fn drop(&mut self) {
        let Ok(mut state) = self.state.try_lock() else { return };
        if let State::Open(conn) = std::mem::replace(&mut *state, State::Ended("dropped")) {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let source = self.source.clone();
                    runtime.spawn(async move {
                        if let Err(error) = conn.rollback().await {
                            tracing::error!(%source, %error, "rolling back a transaction dropped open failed");
                        }
                    });
                }
                Err(_) => drop(conn),
            }
        }
    }
}

/// A transaction's connection, locked for one use ([`Tx::lock`]): a `dyn TxConn`, or what an
/// adapter [`map`](Self::map)s it to (its driver's connection).
pub struct TxGuard<U: ?Sized = dyn TxConn> {
    inner: OwnedMappedMutexGuard<State, U>,
}

impl<U: ?Sized> TxGuard<U> {
    /// The guard of a part of what this one guards: an adapter's own connection type.
    pub fn map<V>(self, f: impl FnOnce(&mut U) -> &mut V) -> TxGuard<V> {
        TxGuard { inner: OwnedMappedMutexGuard::map(self.inner, f) }
    }
}

impl<U: ?Sized> Deref for TxGuard<U> {
    type Target = U;

    fn deref(&self) -> &U {
        &self.inner
    }
}

impl<U: ?Sized> DerefMut for TxGuard<U> {
    fn deref_mut(&mut self) -> &mut U {
        &mut self.inner
    }
}

impl<U: ?Sized> std::fmt::Debug for TxGuard<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxGuard").finish_non_exhaustive()
    }
}
