//! What a scenario's run observed: every write, call, emit, handler run, scope, error, read
//! and object life, in the [`Recorder`] its instances share.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tegu_core::singleton_proto;
use tegu_tx::{ErrorClass, Tx};

use crate::scenario::{Behave, EventSpec, Prop};

/// The tenant and user a scope saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The tenant's key.
    pub tenant: Option<String>,
    /// The user.
    pub user: Option<String>,
}

/// A row written, or tried.
#[derive(Debug, Clone)]
pub struct WriteObs {
    /// The row's tag.
    pub tag: String,
    /// The transaction current when it was written.
    pub tx: Option<u32>,
    /// The calls around it, outermost first.
    pub calls: Vec<u32>,
    /// Its scope.
    pub scope: u32,
    /// The scope's tenant.
    pub tenant: Option<String>,
    /// The statement succeeded.
    pub ok: bool,
    /// How many of `calls` were made when its innermost detached task was spawned (0 on no
    /// detached task): their savepoints may end before the write.
    pub outer_calls: usize,
}

/// A `#[transactional]` call.
#[derive(Debug, Clone)]
pub struct CallObs {
    /// Its number.
    pub id: u32,
    /// Its propagation.
    pub prop: Prop,
    /// Its request.
    pub request: u16,
    /// Its scope.
    pub scope: u32,
    /// The call it was made in, if any.
    pub parent: Option<u32>,
    /// It runs on a detached task, which may outlive its request's handler.
    pub detached: bool,
    /// The transaction current before it.
    pub before: Option<u32>,
    /// The transaction current when its body began (none if it never began).
    pub inside: Option<Option<u32>>,
    /// The transaction current after it returned, in the caller.
    pub after: Option<u32>,
    /// How it ended: `None` while running; an error's class when a `TxError`.
    pub result: Option<Result<(), Option<ErrorClass>>>,
    /// It panicked.
    pub panicked: bool,
}

impl CallObs {
    /// A call starting.
    pub fn new(
        id: u32,
        prop: Prop,
        request: u16,
        scope: u32,
        before: Option<u32>,
        parent: Option<u32>,
        detached: bool,
    ) -> CallObs {
        CallObs {
            id,
            prop,
            request,
            scope,
            parent,
            detached,
            before,
            inside: None,
            after: None,
            result: None,
            panicked: false,
        }
    }
}

/// An event emitted.
#[derive(Debug, Clone)]
pub struct EmitObs {
    /// Its number.
    pub id: u32,
    /// What its handlers do.
    pub spec: EventSpec,
    /// The transaction current when it was emitted.
    pub tx: Option<u32>,
    /// The calls around it.
    pub calls: Vec<u32>,
    /// Its scope.
    pub scope: u32,
    /// Its request.
    pub request: u16,
    /// The tenant and user of its scope.
    pub seen: Seen,
    /// Its marker row was written.
    pub marker_ok: bool,
    /// Emitted on a detached task: perhaps after its scope's completion phase, where its
    /// handlers run at once and a `before_commit` failure stops nothing (nothing waits).
    pub detached: bool,
}

/// An event handler's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// `before_commit`
    BeforeCommit,
    /// `after_commit`
    AfterCommit,
    /// `after_rollback`
    AfterRollback,
}

/// A handler's run.
#[derive(Debug, Clone)]
pub struct HandlerObs {
    /// The event.
    pub id: u32,
    /// The phase.
    pub phase: Phase,
    /// The tenant and user its scope saw.
    pub seen: Seen,
    /// The transaction current in it.
    pub tx: Option<u32>,
    /// What it did.
    pub behave: Behave,
    /// A `before_commit` handler's row was written.
    pub wrote: Option<bool>,
    /// It ran once the handlers were fixed: a replay of a dead letter.
    pub fixed: bool,
}

impl DeadObs {
    /// Whether it is the once-per-cluster handler's (`Handlers::shipped_cluster`).
    pub fn of_cluster(&self) -> bool {
        self.receiver.starts_with("cluster:")
    }
}

/// A dead letter of the run, as the outbox kept it once the run settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadObs {
    /// Its number in the store.
    pub number: i64,
    /// The event's number in the run (from its payload), if it could be read.
    pub event: Option<u32>,
    /// Why: `failed`, `refused`, `undecodable`, `unknown`.
    pub why: &'static str,
    /// The handler, for a `failed` one.
    pub handler: Option<String>,
    /// How many times it was tried.
    pub attempts: u32,
    /// The receiver (instance's subscription) that had it.
    pub receiver: String,
    /// Its last error, as the outbox kept it.
    pub error: String,
}

/// How a scope's work ended, as its runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its work and its completion phase succeeded: acknowledged.
    Ok,
    /// Its work or its completion phase failed.
    Failed,
    /// It panicked.
    Panicked,
    /// Its completion phase's commit ended without an answer ([`ErrorClass`] `OutcomeUnknown`
    /// or a lost connection), or its process stopped before it ended: nobody was told.
    Unknown,
}

/// A scope: a request's, or one nested in it.
#[derive(Debug, Clone)]
pub struct ScopeObs {
    /// Its number (a request's is the request's number).
    pub id: u32,
    /// The scope it was opened in.
    pub parent: Option<u32>,
    /// Its request.
    pub request: u16,
    /// How it ended.
    pub outcome: Outcome,
}

/// Rows a scope read: its request, its tenant, the rows as `(tenant, tag)`.
pub type Read = (u16, String, Vec<(String, String)>);

/// Everything a run observed.
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// Rows written or tried.
    pub writes: Vec<WriteObs>,
    /// Calls, by number.
    pub calls: BTreeMap<u32, CallObs>,
    /// Events emitted.
    pub emits: Vec<EmitObs>,
    /// Handler runs, with the instance that ran them.
    pub handled: Vec<(u8, HandlerObs)>,
    /// Scopes that ended.
    pub scopes: Vec<ScopeObs>,
    /// Errors seen, by request: their class where a transaction's, and their text.
    pub errors: Vec<(u16, Option<ErrorClass>, String)>,
    /// Reads: the request, the scope's tenant, the rows seen.
    pub reads: Vec<Read>,
    /// Tenant objects read: the request, the scope's tenant, the object's tenant and plan.
    pub tenant_objects: Vec<(u16, Option<String>, String, Option<String>)>,
    /// Calls of a retried method.
    pub retried: Vec<RetriedObs>,
    /// The run's dead letters once it settled.
    pub dead: Vec<DeadObs>,
    /// What each replay of them answered (`Handled`, ...), by dead letter.
    pub replays: Vec<(i64, String)>,
    /// The run's dead letters left after the replays.
    pub dead_after_replays: usize,
    /// The run's dead letters of the once-per-cluster handler (the cluster's, one receiver for
    /// every instance), replayed like the others; not in `dead`.
    pub cluster_dead: Vec<DeadObs>,
}

/// A call of a method retried on conflicts (`Op::Retried`): its tries, each a call of its own
/// (a `requires_new` one) in [`Log::calls`].
#[derive(Debug, Clone)]
pub struct RetriedObs {
    /// The tries' call numbers, in order.
    pub tries: Vec<u32>,
    /// How many tries the scenario made conflict.
    pub conflicts: u8,
    /// Its request.
    pub request: u16,
}

/// Counts of objects built and destroyed, per generation of the Apps.
#[derive(Debug, Default)]
pub struct Lives {
    /// Context objects built.
    pub probes_built: AtomicUsize,
    /// Context objects destroyed.
    pub probes_destroyed: AtomicUsize,
    /// Tenant objects whose `create` began.
    pub tenants_created: AtomicUsize,
    /// Tenant objects destroyed.
    pub tenants_destroyed: AtomicUsize,
    /// The process was stopped: what its tasks still see as the runtime and its Apps are
    /// dropped (the App shut down under them) no process that stops sees.
    pub stopped: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct Shared {
    run: AtomicI64,
    next: AtomicU32,
    /// The handlers' bugs are fixed: from now on every handler succeeds (for the replays).
    fixed: std::sync::atomic::AtomicBool,
    log: Mutex<Log>,
    txs: Mutex<Vec<Weak<Tx>>>,
    lives: Mutex<Vec<Arc<Lives>>>,
}

/// The observations of a run, shared by its instances (each App gets a clone, through
/// `override_with`, with its instance number and generation's counts).
#[singleton_proto]
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    shared: Arc<Shared>,
    instance: u8,
    lives: Arc<Lives>,
}

impl Recorder {
    /// A recorder of run `run`.
    pub fn new(run: i64) -> Recorder {
        let lives = Arc::new(Lives::default());
        Recorder {
            shared: Arc::new(Shared {
                run: AtomicI64::new(run),
                next: AtomicU32::new(1),
                fixed: std::sync::atomic::AtomicBool::new(false),
                log: Mutex::new(Log::default()),
                txs: Mutex::new(Vec::new()),
                lives: Mutex::new(vec![Arc::clone(&lives)]),
            }),
            instance: 0,
            lives,
        }
    }

    /// The recorder of instance `instance` of generation `generation` (0 the first).
    pub fn for_instance(&self, instance: u8, generation: usize) -> Recorder {
        let mut lives = self.shared.lives.lock().unwrap_or_else(PoisonError::into_inner);
        while lives.len() <= generation {
            lives.push(Arc::default());
        }
        Recorder { shared: Arc::clone(&self.shared), instance, lives: Arc::clone(&lives[generation]) }
    }

    /// The counts of each generation.
    pub fn lives(&self) -> Vec<Arc<Lives>> {
        self.shared.lives.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The run's number.
    pub fn run(&self) -> i64 {
        self.shared.run.load(Ordering::Relaxed)
    }

    fn next(&self) -> u32 {
        self.shared.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A new row tag.
    pub fn next_tag(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.next())
    }

    /// A new event number.
    pub fn next_event(&self) -> u32 {
        self.next()
    }

    /// A new call number.
    pub fn next_call(&self) -> u32 {
        self.next()
    }

    /// A new scope number (past the requests' own).
    pub fn next_scope(&self) -> u32 {
        10_000 + self.next()
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.shared.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of what was observed so far.
    pub fn peek(&self) -> Log {
        self.log().clone()
    }

    /// Takes what was observed.
    pub fn take(&self) -> Log {
        std::mem::take(&mut *self.log())
    }

    /// The number of transaction `tx` in this run.
    pub fn tx_id(&self, tx: &Arc<Tx>) -> u32 {
        let mut txs = self.shared.txs.lock().unwrap_or_else(PoisonError::into_inner);
        // A `Weak` keeps the allocation: no other transaction gets its address while it is here.
        if let Some(i) = txs.iter().position(|t| std::ptr::eq(t.as_ptr(), Arc::as_ptr(tx))) {
            return i as u32 + 1;
        }
        txs.push(Arc::downgrade(tx));
        txs.len() as u32
    }

    /// A row written or tried.
    pub fn wrote(&self, write: WriteObs) {
        self.log().writes.push(write);
    }

    /// A call starting.
    pub fn call(&self, call: CallObs) {
        self.log().calls.insert(call.id, call);
    }

    /// From now on every handler succeeds: their bugs are fixed, for the replays.
    pub fn fix(&self) {
        self.shared.fixed.store(true, Ordering::Release);
    }

    /// Whether the handlers are fixed.
    pub fn fixed(&self) -> bool {
        self.shared.fixed.load(Ordering::Acquire)
    }

    /// This recorder's instance.
    pub fn instance(&self) -> u8 {
        self.instance
    }

    /// The dead letters of the run, the replays' answers, and those left after them.
    pub fn dead_letters(&self, dead: Vec<DeadObs>, replays: Vec<(i64, String)>, left: usize) {
        let mut log = self.log();
        let (cluster, own): (Vec<DeadObs>, Vec<DeadObs>) = dead.into_iter().partition(DeadObs::of_cluster);
        let replays = replays.into_iter().filter(|(n, _)| own.iter().any(|d| d.number == *n)).collect();
        (log.dead, log.replays, log.dead_after_replays, log.cluster_dead) = (own, replays, left, cluster);
    }

    /// A call of a retried method ended.
    pub fn retried(&self, retried: RetriedObs) {
        self.log().retried.push(retried);
    }

    /// A call's body starting, in transaction `tx`.
    pub fn started(&self, call: u32, tx: Option<u32>) {
        if let Some(c) = self.log().calls.get_mut(&call) {
            c.inside = Some(tx);
        }
    }

    /// A call returned (or panicked).
    pub fn returned(&self, call: u32, result: Result<(), Option<ErrorClass>>, panicked: bool, after: Option<u32>) {
        if let Some(c) = self.log().calls.get_mut(&call) {
            c.result = Some(result);
            c.panicked = panicked;
            c.after = after;
        }
    }

    /// An event emitted.
    pub fn emitted(&self, emit: EmitObs) {
        self.log().emits.push(emit);
    }

    /// A handler ran.
    pub fn handled(&self, run: HandlerObs) {
        let instance = self.instance;
        self.log().handled.push((instance, run));
    }

    /// A scope ended.
    pub fn scope(&self, scope: ScopeObs) {
        self.log().scopes.push(scope);
    }

    /// Whether this recorder's process was stopped: an error seen after it is dropped.
    fn stopped(&self) -> bool {
        self.lives.stopped.load(Ordering::Acquire)
    }

    /// A transaction's error.
    pub fn error(&self, request: u16, class: ErrorClass, text: String) {
        if self.stopped() {
            return;
        }
        self.log().errors.push((request, Some(class), text));
    }

    /// Another error.
    pub fn error_text(&self, request: u16, text: String) {
        if self.stopped() {
            return;
        }
        self.log().errors.push((request, None, text));
    }

    /// Rows read.
    pub fn read(&self, request: u16, tenant: String, rows: Vec<(String, String)>) {
        self.log().reads.push((request, tenant, rows));
    }

    /// A tenant object read.
    pub fn tenant_object(&self, request: u16, scope_tenant: Option<String>, tenant: String, plan: Option<String>) {
        self.log().tenant_objects.push((request, scope_tenant, tenant, plan));
    }

    /// A context object built.
    pub fn probe_built(&self) {
        self.lives.probes_built.fetch_add(1, Ordering::Relaxed);
    }

    /// A context object destroyed.
    pub fn probe_destroyed(&self) {
        self.lives.probes_destroyed.fetch_add(1, Ordering::Relaxed);
    }

    /// A tenant object's `create` began.
    pub fn tenant_created(&self) {
        self.lives.tenants_created.fetch_add(1, Ordering::Relaxed);
    }

    /// A tenant object destroyed.
    pub fn tenant_destroyed(&self) {
        self.lives.tenants_destroyed.fetch_add(1, Ordering::Relaxed);
    }
}
