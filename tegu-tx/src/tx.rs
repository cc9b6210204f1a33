//! One open transaction, shared by the methods that join it, and which transactions a task's
//! `#[transactional]` methods in progress run in (a task-local list of frames, set around each
//! method's future, so that the methods it calls, awaited in it on the same task, use them; a
//! transaction's statements and commit ask it which savepoints the calling task holds).

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};

use tokio::sync::{Mutex, Notify, OwnedMappedMutexGuard, OwnedMutexGuard};

use tegu_core::events::EventHold;

use crate::error::{ErrorClass, TxError};
use crate::options::TxOptions;
use crate::source::{TxConn, TxSource};

/// A transaction of a data source: what a `#[transactional]` method begins and the methods it
/// calls join. Its connection is used by one task at a time ([`lock`](Self::lock)).
///
/// Several methods of a request may use it at once (a `join!`, tasks of the request): their
/// statements take turns on its connection. While a `nested` method's savepoint is set, only
/// that method (and what it calls) runs statements: the others wait for it to end, so that
/// rolling back to the savepoint never undoes what another method did.
///
/// Adapters reach it through [`Transactions::current`](crate::Transactions::current); user
/// code through the adapter (tegu-sqlx's `Database::conn`).
pub struct Tx {
    source: Arc<str>,
    /// Begun read-only.
    read_only: bool,
    /// The App whose methods began it.
    pub(crate) owner: Owner,
    state: Arc<Mutex<State>>,
    /// The events emitted in it (by the methods that began or joined it): prepared before its
    /// commit, inside it, and released with its outcome.
    pub(crate) events: EventHold,
    /// How many methods run in it now, on any task: its commit waits for them.
    active: std::sync::atomic::AtomicUsize,
    /// The method that began it failed, panicked or was cancelled: rolled back at its next use
    /// or at the scope's end, never committed.
    doomed: AtomicBool,
    /// Work of the scope other than the methods of the one that began it used it (a method of
    /// another task that joined it, a statement outside any method, the completion phase's
    /// `before_commit` step): rolled back by that method, it fails the scope.
    shared: AtomicBool,
    /// The savepoints set, oldest first. One cut short (a panic, a cancellation) is marked
    /// abandoned and rolled back to before the transaction's next use.
    savepoints: SyncMutex<Vec<Savepoint>>,
    /// Wakes the statements waiting for a savepoint to end.
    turn: Notify,
    next_savepoint: AtomicU32,
    /// A conflict a statement of it failed with ([`note_failure`](Self::note_failure)): a
    /// method that owns it may run again.
    conflict: SyncMutex<Option<ErrorClass>>,
}

/// A savepoint of a `nested` method.
struct Savepoint {
    id: u32,
    abandoned: bool,
}

/// A savepoint's name in SQL.
fn savepoint_name(id: u32) -> String {
    format!("di_sp_{id}")
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
    pub(crate) async fn begin(
        source: &dyn TxSource,
        name: &str,
        owner: Owner,
        options: &TxOptions,
    ) -> Result<Arc<Tx>, TxError> {
        let began = if options.plain_begin() { source.begin() } else { source.begin_with(options) };
        let conn = began.await.map_err(|error| TxError::database("beginning a transaction", name, error))?;
        Ok(Arc::new(Tx {
            read_only: options.is_read_only(),
            source: name.into(),
            owner,
            state: Arc::new(Mutex::new(State::Open(conn))),
            events: EventHold::new(),
            active: std::sync::atomic::AtomicUsize::new(0),
            doomed: AtomicBool::new(false),
            shared: AtomicBool::new(false),
            savepoints: SyncMutex::new(Vec::new()),
            turn: Notify::new(),
            next_savepoint: AtomicU32::new(1),
            conflict: SyncMutex::new(None),
        }))
    }

    /// The data source's name.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether it was begun read-only (`#[transactional(read_only)]`): a write in it fails.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Notes that a statement of the transaction failed with `class`: what an adapter calls
    /// for its statements' errors (tegu-sqlx's `Database::error` does), so that a method
    /// retried on conflicts (`#[transactional(requires_new, retry = ..)]`) runs again after a
    /// serialization failure or a deadlock, whatever its error type made of the error.
    pub fn note_failure(&self, class: ErrorClass) {
        if matches!(class, ErrorClass::SerializationFailure | ErrorClass::Deadlock) {
            self.conflict.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(class);
        }
    }

    /// The conflict a statement of it failed with, if any.
    pub(crate) fn conflict(&self) -> Option<ErrorClass> {
        *self.conflict.lock().unwrap_or_else(|e| e.into_inner())
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
        self.lock_holding(&savepoints_of(self)).await
    }

    /// [`lock`](Self::lock) for a caller that holds the savepoints `held`: it waits while a
    /// savepoint it does not hold is the newest set.
    async fn lock_holding(&self, held: &[u32]) -> Result<TxGuard, TxError> {
        let state = self.turn(held).await?;
        Ok(TxGuard {
            inner: OwnedMutexGuard::map(state, |state| match state {
                State::Open(conn) => &mut **conn,
                State::Ended(_) => unreachable!("settled: open"),
            }),
        })
    }

    /// The state, open and settled, once no savepoint but those in `held` is the newest set.
    async fn turn(&self, held: &[u32]) -> Result<OwnedMutexGuard<State>, TxError> {
        loop {
            let turn = self.turn.notified();
            let mut turn = std::pin::pin!(turn);
            turn.as_mut().enable();
            let mut state = Arc::clone(&self.state).lock_owned().await;
            self.settle(&mut state).await?;
            let newest = self.savepoints().last().map(|s| s.id);
            if newest.is_none_or(|id| held.contains(&id)) {
                return Ok(state);
            }
            // Another method's savepoint: wait for it to end, without the connection.
            drop(state);
            turn.await;
        }
    }

    fn savepoints(&self) -> std::sync::MutexGuard<'_, Vec<Savepoint>> {
        self.savepoints.lock().unwrap_or_else(|e| e.into_inner())
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
            self.savepoints().clear();
            self.turn.notify_waiters();
            self.events.release(false);
            return Err(TxError::Aborted { data_source: self.source.to_string() });
        }
        // The newest savepoints, while abandoned: their methods were cut short.
        loop {
            let abandoned = self.savepoints().last().filter(|s| s.abandoned).map(|s| s.id);
            let Some(id) = abandoned else { break };
            let name = savepoint_name(id);
            let undone = async {
                conn.rollback_to_savepoint(&name).await?;
                conn.release_savepoint(&name).await
            };
            self.pop_savepoint(id);
            if let Err(error) = undone.await {
                // Its work may still be in the transaction: never commit it.
                self.doom();
                return Err(self.database("rolling back to an abandoned savepoint", error));
            }
        }
        Ok(())
    }

    /// Takes savepoint `id` off the stack and wakes the statements waiting for it.
    fn pop_savepoint(&self, id: u32) {
        self.savepoints().retain(|s| s.id != id);
        self.turn.notify_waiters();
    }

    /// Runs the `before_commit` step of the events emitted in the transaction (their handlers,
    /// the outbox's write) inside it, then commits once no other method runs in it (a task of
    /// the request that joined it) and no method's savepoint is set: what they do is all or
    /// nothing. Until nothing is left to prepare, in the `COMMIT`'s turn: a method that was
    /// still running when the step began may emit more, and those are prepared too. A doomed or
    /// aborted transaction is rolled back instead, and that is the error. The events are
    /// released with the outcome.
    pub(crate) async fn finish(self: &Arc<Self>) -> Result<(), TxError> {
        loop {
            let prepared = within(self.owner, Arc::clone(self), None, self.events.prepare()).await;
            if let Err(source) = prepared {
                self.rollback().await;
                return Err(TxError::Events { data_source: self.source.to_string(), source: Box::new(source) });
            }
            self.methods_done().await;
            let state = match self.turn(&[]).await {
                Ok(state) => state,
                Err(error) => {
                    self.events.release(false);
                    return Err(error);
                }
            };
            // Holding the connection: no statement runs, and with no other method in the
            // transaction, none can emit. What came meanwhile is prepared first.
            if self.events.unprepared() || self.others_running() {
                continue;
            }
            return self.commit(state).await;
        }
    }

    /// Commits on the connection `state` holds; the events are released with the outcome.
    async fn commit(&self, mut state: OwnedMutexGuard<State>) -> Result<(), TxError> {
        let State::Open(conn) = std::mem::replace(&mut *state, State::Ended("committed")) else {
            unreachable!("settled: open")
        };
        let committed = conn.commit().await.map_err(|error| {
            *state = State::Ended("its commit failed");
            self.database("committing", error)
        });
        drop(state);
        match &committed {
            // Committed or not, the database may say; the handlers cannot be told either.
            Err(error) if error.class() == ErrorClass::OutcomeUnknown => self.events.release_unknown(),
            _ => self.events.release(committed.is_ok()),
        }
        committed
    }

    /// Whether a method of another task runs in the transaction.
    fn others_running(&self) -> bool {
        self.active.load(Ordering::Acquire) > frames_of(self)
    }

    /// Waits until no method runs in the transaction but those of the calling task (which
    /// cannot end while it waits).
    async fn methods_done(&self) {
        loop {
            let turn = self.turn.notified();
            let mut turn = std::pin::pin!(turn);
            turn.as_mut().enable();
            if !self.others_running() {
                return;
            }
            turn.await;
        }
    }

    /// Counts a method running in the transaction until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Ordering::AcqRel);
        Active(Arc::clone(self))
    }

    /// Rolls back if still open; a failure is logged (the transaction is over either way: the
    /// connection goes back with nothing committed).
    pub(crate) async fn rollback(&self) {
        let mut state = self.state.lock().await;
        self.end(&mut state).await;
    }

    async fn end(&self, state: &mut State) {
        if let State::Open(conn) = std::mem::replace(state, State::Ended("rolled back"))
            && let Err(error) = conn.rollback().await
        {
            tracing::error!(source = %self.source, %error, "rolling back failed");
        }
        // Statements waiting for a savepoint's method see the end now.
        self.savepoints().clear();
        self.turn.notify_waiters();
        self.events.release(false);
    }

    /// Marks the transaction as not to be committed: its next use rolls it back.
    pub(crate) fn doom(&self) {
        self.doomed.store(true, Ordering::Release);
    }

    /// Marks the transaction as used by work of the scope other than the methods of the one
    /// that began it, before that use (under the scope's list lock, which orders it).
    pub(crate) fn share(&self) {
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Whether work of the scope other than its beginner's methods used it (read under the
    /// scope's list lock).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }

    /// Sets a savepoint for a `nested` method (waiting while another method's is set); its id.
    pub(crate) async fn savepoint(&self) -> Result<u32, TxError> {
        let id = self.next_savepoint.fetch_add(1, Ordering::Relaxed);
        let mut conn = self.lock().await?;
        let name = savepoint_name(id);
        conn.savepoint(&name).await.map_err(|error| self.database("setting a savepoint", error))?;
        self.savepoints().push(Savepoint { id, abandoned: false });
        Ok(id)
    }

    /// Ends savepoint `id`, which the caller holds: released if `keep`, else rolled back to
    /// and released. One that cannot be released because the database aborted the
    /// transaction (PostgreSQL, after a failed statement of the savepoint's method) is rolled
    /// back to, so that the transaction goes on without its work, and that is the error.
    pub(crate) async fn end_savepoint(&self, id: u32, keep: bool) -> Result<(), TxError> {
        let mut held = savepoints_of(self);
        held.push(id);
        let mut conn = match self.lock_holding(&held).await {
            Ok(conn) => conn,
            Err(error) => {
                self.pop_savepoint(id);
                return Err(error);
            }
        };
        let name = savepoint_name(id);
        let ended = async {
            if keep {
                match conn.release_savepoint(&name).await {
                    Ok(()) => return Ok(()),
                    Err(error) => {
                        let error = self.database("releasing a savepoint", error);
                        if error.class() != ErrorClass::Aborted {
                            return Err(error);
                        }
                        conn.rollback_to_savepoint(&name)
                            .await
                            .map_err(|e| self.database("rolling back to a savepoint", e))?;
                        conn.release_savepoint(&name).await.map_err(|e| self.database("releasing a savepoint", e))?;
                        return Err(error);
                    }
                }
            }
            conn.rollback_to_savepoint(&name).await.map_err(|e| self.database("rolling back to a savepoint", e))?;
            conn.release_savepoint(&name).await.map_err(|e| self.database("releasing a savepoint", e))
        };
        let ended = ended.await;
        drop(conn);
        self.pop_savepoint(id);
        ended
    }

    /// A `nested` method holding savepoint `id` was cut short: rolled back to before the next
    /// use.
    pub(crate) fn abandon(&self, id: u32) {
        if let Some(savepoint) = self.savepoints().iter_mut().find(|s| s.id == id) {
            savepoint.abandoned = true;
        }
        self.turn.notify_waiters();
    }

    fn ended(&self, how: &'static str) -> TxError {
        TxError::Ended { data_source: self.source.to_string(), how }
    }

    fn database(&self, doing: &'static str, error: tegu_core::error::BoxError) -> TxError {
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

/// A method running in a transaction ([`Tx::enter`]): its commit waits for it.
pub(crate) struct Active(Arc<Tx>);

impl Active {
    /// Whether it counts `tx`.
    pub(crate) fn is(&self, tx: &Arc<Tx>) -> bool {
        Arc::ptr_eq(&self.0, tx)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.turn.notify_waiters();
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

/// A number per [`Transactions`](crate::Transactions), unique in the process: tells one App's
/// transactions from another's of the same data source name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner(u64);

impl Default for Owner {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Owner(NEXT.fetch_add(1, Ordering::Relaxed))
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
    _running: Vec<Active>,
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
    let mut running: Vec<Active> = Vec::new();
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
