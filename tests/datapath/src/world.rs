//! The service the scenarios drive, as a user of the crates would write it: a repository on
//! one data source (SQLite or PostgreSQL, the other absent), `#[transactional]` methods of
//! every propagation that run a scenario's operations, event handlers of every phase, a
//! lineage type of its own (`User`), a context object whose life is counted, and a tenant's
//! object whose `create` reads through the repository. Every observation goes to the
//! [`Recorder`], shared by the instances of a scenario.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use tegu_core::error::BoxError;
use tegu_core::events::EventBus;
use tegu_core::lineage::{Lineage, Tenant, Travels};
use tegu_core::tenant::{TenantObjects, TenantRef};
use tegu_core::{App, ContextRef, context_proto, handlers, singleton_proto};
use tegu_sqlx::{Database, Postgres, Sqlite};
use tegu_tx::{ErrorClass, Transactions, TxError, transactional};

use crate::record::{CallObs, EmitObs, HandlerObs, Outcome, Phase, Recorder, RetriedObs, ScopeObs, Seen, WriteObs};
use crate::scenario::{Behave, End, EventSpec, Op, Prop};

/// The data source's object name.
pub const SOURCE: &str = "database";

/// Who a scope acts for: the service's own lineage type, next to the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User(pub String);

impl Travels for User {
    const HEADER: &'static str = "x-datapath-user";

    fn encode(&self) -> String {
        self.0.clone()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(User(value.to_owned()))
    }
}

/// An event of the process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Local {
    /// The run it belongs to (events of an earlier run, still in a broker, are left alone).
    pub run: i64,
    /// Its number in the run.
    pub id: u32,
    /// What its handlers do.
    pub spec: EventSpec,
}

/// An event carried by the outbox to every instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shipped {
    /// The run it belongs to.
    pub run: i64,
    /// Its number in the run.
    pub id: u32,
    /// What its handlers do.
    pub spec: EventSpec,
}

tegu_outbox::external_event!(Shipped = "datapath.shipped");
tegu_core::lineage_type!(User);

/// A failure of a scenario's operation.
#[derive(Debug)]
pub enum Failure {
    /// The transaction's.
    Tx(TxError),
    /// One the scenario asked for.
    Injected,
    /// The container's (a scope, a tenant object).
    Di(String),
    /// A task that panicked.
    Panicked,
}

impl From<TxError> for Failure {
    fn from(error: TxError) -> Self {
        Failure::Tx(error)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Tx(e) => write!(f, "{e}"),
            Failure::Injected => f.write_str("injected"),
            Failure::Di(e) => f.write_str(e),
            Failure::Panicked => f.write_str("a task panicked"),
        }
    }
}

/// One request's context object: its builds and destroys are counted.
#[derive(Debug)]
pub struct Probe {
    rec: Arc<Recorder>,
}

#[context_proto(destroy = finish)]
impl Probe {
    fn new(rec: Arc<Recorder>) -> Self {
        rec.probe_built();
        Probe { rec }
    }

    fn touch(&self) {}

    async fn finish(&self) {
        self.rec.probe_destroyed();
    }
}

/// The database, whichever the App has.
#[singleton_proto]
#[derive(Debug)]
pub struct Repo {
    #[inject(name = "database")]
    sqlite: Option<Arc<Database<Sqlite>>>,
    #[inject(name = "database")]
    postgres: Option<Arc<Database<Postgres>>>,
    #[inject]
    rec: Arc<Recorder>,
}

/// Runs the same statement on whichever database the repository has.
macro_rules! on_db {
    ($self:ident, $db:ident => $body:expr) => {
        match (&$self.sqlite, &$self.postgres) {
            (Some($db), _) => $body,
            (None, Some($db)) => $body,
            (None, None) => Err(Failure::Di("the App has no data source".into())),
        }
    };
}

impl Repo {
    /// Writes row `tag` of the run as the scope's tenant, in the current transaction if any.
    pub async fn insert(&self, tag: &str, tenant: &str) -> Result<(), Failure> {
        let run = self.rec.run();
        on_db!(self, db => {
            let mut conn = db.conn().await?;
            let done = sqlx::query("INSERT INTO dp_rows (run, tag, tenant) VALUES ($1, $2, $3)")
                .bind(run)
                .bind(tag)
                .bind(tenant)
                .execute(&mut *conn)
                .await;
            done.map(drop).map_err(|e| db.error("inserting a row", e).into())
        })
    }

    /// A statement the table's `CHECK` refuses.
    pub async fn bad(&self, tenant: &str) -> Result<(), Failure> {
        self.insert("bad", tenant).await
    }

    /// The run's rows the scope may see, as `(tenant, tag)`: on PostgreSQL, those row-level
    /// security lets it see; on SQLite, those of `tenant`.
    pub async fn read(&self, tenant: &str) -> Result<Vec<(String, String)>, Failure> {
        let run = self.rec.run();
        on_db!(self, db => {
            let mut conn = db.conn().await?;
            let sql = if self.sqlite.is_some() {
                "SELECT tenant, tag FROM dp_rows WHERE run = $1 AND tenant = $2"
            } else {
                "SELECT tenant, tag FROM dp_rows WHERE run = $1 AND $2 = $2"
            };
            let rows = sqlx::query_as(sql)
                .bind(run)
                .bind(tenant)
                .fetch_all(&mut *conn)
                .await;
            rows.map_err(|e| db.error("reading rows", e).into())
        })
    }

    /// The tenant's plan, if the scope may see its row.
    #[transactional]
    pub async fn plan(&self, tenant: &str) -> Result<Option<String>, Failure> {
        on_db!(self, db => {
            let mut conn = db.conn().await?;
            let plan = sqlx::query_scalar("SELECT plan FROM dp_tenants WHERE tenant = $1")
                .bind(tenant)
                .fetch_optional(&mut *conn)
                .await;
            plan.map_err(|e| db.error("reading a tenant", e).into())
        })
    }
}

/// A tenant's settings, loaded by `create` through the repository.
#[derive(Debug)]
pub struct Settings {
    /// The tenant it was built for.
    pub tenant: String,
    /// Its plan, as `create` read it.
    pub plan: Option<String>,
}

/// Builds a tenant's [`Settings`].
#[singleton_proto]
#[derive(Debug)]
pub struct SettingsLoader {
    #[inject]
    repo: Arc<Repo>,
    #[inject]
    rec: Arc<Recorder>,
}

impl TenantObjects for SettingsLoader {
    type Object = Settings;

    async fn create(&self, tenant: &Tenant) -> Result<Settings, BoxError> {
        let plan = self.repo.plan(tenant.key()).await.map_err(|e| match e {
            Failure::Tx(e) => Box::new(e) as BoxError,
            other => other.to_string().into(),
        })?;
        self.rec.tenant_created();
        Ok(Settings { tenant: tenant.key().to_owned(), plan })
    }

    async fn destroy(&self, _: &Tenant, _: Arc<Settings>) -> Result<(), BoxError> {
        self.rec.tenant_destroyed();
        Ok(())
    }
}

/// A boxed future of an operation.
type OpFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// Where an operation runs: its request, its scope, and the calls around it (innermost last).
#[derive(Debug, Clone)]
pub struct Cx {
    /// The request.
    pub request: u16,
    /// The scope (the request's, or a nested one).
    pub scope: u32,
    /// The calls it runs in, outermost first (a task spawned in a method runs in its calls).
    pub calls: Vec<u32>,
    /// It runs on a detached task.
    pub detached: bool,
    /// How many of `calls` were made before the innermost detached task it runs on was
    /// spawned: their savepoints may end before it does (a detached task spawned in a `nested`
    /// method of another detached task outlives that method's savepoint too).
    pub outer_calls: usize,
}

/// Runs a scenario's operations.
#[singleton_proto]
#[derive(Debug)]
pub struct Worker {
    #[inject]
    repo: Arc<Repo>,
    #[inject]
    transactions: Arc<Transactions>,
    #[inject]
    events: Arc<EventBus>,
    #[inject]
    rec: Arc<Recorder>,
    #[inject]
    probe: ContextRef<Probe>,
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    user: ContextRef<User>,
    #[inject]
    settings: TenantRef<SettingsLoader>,
}

impl Worker {
    /// The current transaction, as the recorder numbers them.
    fn tx_now(&self) -> Option<u32> {
        self.transactions.current(SOURCE).map(|tx| self.rec.tx_id(&tx))
    }

    fn seen(&self) -> Seen {
        seen(&self.tenant, &self.user)
    }

    /// Runs `ops` in order; the first failure not taken in stride ends them.
    pub fn exec<'a>(self: &'a Arc<Self>, ops: &'a [Op], cx: Cx) -> OpFuture<'a> {
        Box::pin(async move {
            for op in ops {
                self.op(op, &cx).await?;
            }
            Ok(())
        })
    }

    async fn op(self: &Arc<Self>, op: &Op, cx: &Cx) -> Result<(), Failure> {
        match op {
            Op::Write => {
                self.probe.get().touch();
                let tag = self.rec.next_tag("w");
                self.write(&tag, cx).await
            }
            Op::Read => {
                let tenant = self.seen().tenant.unwrap_or_default();
                let rows = self.repo.read(&tenant).await?;
                self.rec.read(cx.request, tenant, rows);
                Ok(())
            }
            Op::Bad { caught } => {
                let done = self.repo.bad(&self.seen().tenant.unwrap_or_default()).await;
                if let Err(Failure::Tx(e)) = &done {
                    self.rec.error(cx.request, e.class(), e.to_string());
                }
                if *caught { Ok(()) } else { done }
            }
            Op::Emit(spec) => {
                let id = self.rec.next_event();
                // The marker row tells whether the unit the event follows committed.
                let marker = self.write(&format!("e{id}"), cx).await;
                self.rec.emitted(EmitObs {
                    id,
                    spec: *spec,
                    tx: self.tx_now(),
                    calls: cx.calls.clone(),
                    scope: cx.scope,
                    request: cx.request,
                    seen: self.seen(),
                    marker_ok: marker.is_ok(),
                    detached: cx.detached,
                });
                let run = self.rec.run();
                if spec.external {
                    self.events.emit(Shipped { run, id, spec: *spec });
                } else {
                    self.events.emit(Local { run, id, spec: *spec });
                }
                Ok(())
            }
            Op::Call { prop, body, end, caught } => self.call(*prop, body, *end, *caught, cx).await,
            Op::Retried { body, conflicts, end, caught } => {
                self.retried_call(body, *conflicts, *end, *caught, cx).await
            }
            Op::Spawn { body, detached } => {
                let worker = Arc::clone(self);
                let body = body.clone();
                // A task spawned in a method is part of it (tegu_core::spawn carries its frames):
                // the calls around it stay its calls.
                let mut inner = cx.clone();
                if *detached {
                    inner.detached = true;
                    inner.outer_calls = inner.calls.len();
                }
                let task = tegu_core::spawn(async move { worker.exec(&body, inner).await });
                if *detached {
                    return Ok(());
                }
                match task.await {
                    Ok(done) => done,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => Err(Failure::Panicked),
                }
            }
            Op::ActAs { user, tenant, body } => {
                let Some(app) = App::current() else { return Err(Failure::Di("no App in the scope".into())) };
                let scope = self.rec.next_scope();
                let mut builder = app.scope().lineage(&Lineage::current()).with(User(format!("u{user}")));
                if let (Ok(b), Some(t)) = (&mut builder, tenant) {
                    let taken = std::mem::replace(b, app.scope());
                    *b = match taken.tenant(format!("t{t}")) {
                        Ok(b) => b,
                        Err(e) => return Err(Failure::Di(e.to_string())),
                    };
                }
                let builder = builder.map_err(|e| Failure::Di(e.to_string()))?;
                let inner = Cx { scope, ..cx.clone() };
                let worker = Arc::clone(self);
                let work = async move {
                    let done = worker.exec(body, inner).await;
                    // As a handler answering a failure does: the scope's work is not kept.
                    if done.is_err() {
                        tegu_core::scope::fail_scope();
                    }
                    done
                };
                let ran = std::panic::AssertUnwindSafe(builder.try_run(work)).catch_unwind().await;
                let outcome = match &ran {
                    Ok(Ok(Ok(()))) => Outcome::Ok,
                    Ok(Ok(Err(_))) => Outcome::Failed,
                    Ok(Err(e)) => {
                        let class = crate::run::class_of(e);
                        match class {
                            Some(class) => self.rec.error(cx.request, class, e.to_string()),
                            None => self.rec.error_text(cx.request, e.to_string()),
                        }
                        if class.is_some_and(crate::run::unknown_outcome) { Outcome::Unknown } else { Outcome::Failed }
                    }
                    Err(_) => Outcome::Panicked,
                };
                self.rec.scope(ScopeObs { id: scope, parent: Some(cx.scope), request: cx.request, outcome });
                if let Err(panic) = ran {
                    std::panic::resume_unwind(panic);
                }
                Ok(())
            }
            Op::TenantObject => {
                let seen = self.seen();
                match self.settings.get().await {
                    Ok(settings) => {
                        self.rec.tenant_object(cx.request, seen.tenant, settings.tenant.clone(), settings.plan.clone());
                        Ok(())
                    }
                    Err(e) => {
                        let text = format!("reading the tenant's object: {e}");
                        match crate::run::class_of(&e) {
                            Some(class) => self.rec.error(cx.request, class, text),
                            None => self.rec.error_text(cx.request, text),
                        }
                        Err(Failure::Di(e.to_string()))
                    }
                }
            }
            Op::Yield => {
                tokio::task::yield_now().await;
                Ok(())
            }
        }
    }

    /// Writes row `tag`, and records where it was written.
    async fn write(&self, tag: &str, cx: &Cx) -> Result<(), Failure> {
        let seen = self.seen();
        let tx = self.tx_now();
        let done = self.repo.insert(tag, seen.tenant.as_deref().unwrap_or_default()).await;
        if let Err(Failure::Tx(e)) = &done {
            self.rec.error(cx.request, e.class(), e.to_string());
        }
        self.rec.wrote(WriteObs {
            tag: tag.to_owned(),
            tx,
            calls: cx.calls.clone(),
            scope: cx.scope,
            tenant: seen.tenant,
            ok: done.is_ok(),
            outer_calls: if cx.detached { cx.outer_calls } else { 0 },
        });
        done
    }

    async fn call(self: &Arc<Self>, prop: Prop, body: &[Op], end: End, caught: bool, cx: &Cx) -> Result<(), Failure> {
        let id = self.rec.next_call();
        let before = self.tx_now();
        self.rec.call(CallObs::new(id, prop, cx.request, cx.scope, before, cx.calls.last().copied(), cx.detached));
        let mut inner = cx.clone();
        inner.calls.push(id);
        let ran = std::panic::AssertUnwindSafe(async {
            match prop {
                Prop::Required => self.required(body, end, inner).await,
                Prop::RequiresNew => self.requires_new(body, end, inner).await,
                Prop::Nested => self.nested(body, end, inner).await,
                Prop::Mandatory => self.mandatory(body, end, inner).await,
                Prop::Never => self.never(body, end, inner).await,
            }
        })
        .catch_unwind()
        .await;
        let after = self.tx_now();
        let result = self.answered(&ran, cx);
        self.rec.returned(id, result, ran.is_err(), after);
        caught_or(ran, caught)
    }

    /// What a call answered, as the model records it (a transaction's error noted with its
    /// class).
    fn answered(&self, ran: &std::thread::Result<Result<(), Failure>>, cx: &Cx) -> Result<(), Option<ErrorClass>> {
        match ran {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Failure::Tx(e))) => {
                self.rec.error(cx.request, e.class(), e.to_string());
                Err(Some(e.class()))
            }
            Ok(Err(_)) | Err(_) => Err(None),
        }
    }

    /// A call of the method retried on conflicts: each try is recorded as a `requires_new`
    /// call of its own; the tries before the last answered the conflict, the last what the
    /// method answered.
    async fn retried_call(
        self: &Arc<Self>,
        body: &[Op],
        conflicts: u8,
        end: End,
        caught: bool,
        cx: &Cx,
    ) -> Result<(), Failure> {
        let before = self.tx_now();
        let tries = std::sync::Mutex::new(Vec::new());
        let ran = std::panic::AssertUnwindSafe(self.retried(body, conflicts, end, cx.clone(), before, &tries))
            .catch_unwind()
            .await;
        let after = self.tx_now();
        let result = self.answered(&ran, cx);
        let tries = tries.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((last, earlier)) = tries.split_last() {
            for id in earlier {
                self.rec.returned(*id, Err(None), false, after);
            }
            self.rec.returned(*last, result, ran.is_err(), after);
        }
        self.rec.retried(RetriedObs { tries, conflicts, request: cx.request });
        caught_or(ran, caught)
    }

    /// The body of every `#[transactional]` method: notes the transaction it runs in, runs its
    /// operations, ends as asked.
    async fn method(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        let call = *cx.calls.last().expect("a method's context names its call");
        self.rec.started(call, self.tx_now());
        let done = self.exec(body, cx).await;
        match end {
            End::Ok => done,
            End::Err => done.and(Err(Failure::Injected)),
            End::Panic => panic!("a method's injected panic"),
        }
    }

    #[transactional]
    async fn required(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        self.method(body, end, cx).await
    }

    /// One try of the method retried on conflicts: a call of its own; the first `conflicts`
    /// tries note a serialization failure on their transaction after their body, and fail.
    #[transactional(requires_new, retry = 2, backoff_ms = 1)]
    async fn retried(
        self: &Arc<Self>,
        body: &[Op],
        conflicts: u8,
        end: End,
        cx: Cx,
        before: Option<u32>,
        tries: &std::sync::Mutex<Vec<u32>>,
    ) -> Result<(), Failure> {
        let id = self.rec.next_call();
        let attempt = {
            let mut tries = tries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            tries.push(id);
            tries.len()
        };
        self.rec.call(CallObs::new(
            id,
            Prop::RequiresNew,
            cx.request,
            cx.scope,
            before,
            cx.calls.last().copied(),
            cx.detached,
        ));
        let mut inner = cx;
        inner.calls.push(id);
        if attempt > usize::from(conflicts) {
            return self.method(body, end, inner).await;
        }
        self.rec.started(id, self.tx_now());
        let done = self.exec(body, inner).await;
        if let Some(tx) = self.transactions.current(SOURCE) {
            tx.note_failure(ErrorClass::SerializationFailure);
        }
        done.and(Err(Failure::Injected))
    }

    #[transactional(requires_new)]
    async fn requires_new(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        self.method(body, end, cx).await
    }

    #[transactional(nested)]
    async fn nested(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        self.method(body, end, cx).await
    }

    #[transactional(mandatory)]
    async fn mandatory(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        self.method(body, end, cx).await
    }

    #[transactional(never)]
    async fn never(self: &Arc<Self>, body: &[Op], end: End, cx: Cx) -> Result<(), Failure> {
        self.method(body, end, cx).await
    }
}

/// How many times the method of `Op::Retried` runs again: its attribute's `retry`.
pub const RETRIES: u8 = 2;

/// What a call gives its caller: its answer, or `Ok` where the caller takes its failure (a
/// panic included) in stride; a panic not taken goes on unwinding.
fn caught_or(ran: std::thread::Result<Result<(), Failure>>, caught: bool) -> Result<(), Failure> {
    match ran {
        Ok(done) if !caught => done,
        Ok(_) => Ok(()),
        Err(_) if caught => Ok(()),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The tenant and user a scope sees.
fn seen(tenant: &ContextRef<Tenant>, user: &ContextRef<User>) -> Seen {
    Seen { tenant: tenant.try_get().ok().map(|t| t.key().to_owned()), user: user.try_get().ok().map(|u| u.0.clone()) }
}

/// The event handlers, every phase, both event types.
#[singleton_proto]
#[derive(Debug)]
pub struct Handlers {
    #[inject]
    repo: Arc<Repo>,
    #[inject]
    rec: Arc<Recorder>,
    #[inject]
    transactions: Arc<Transactions>,
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    user: ContextRef<User>,
}

/// Numbers the external event's effects: each delivery's row is a row of its own.
static EFFECTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Handlers {
    /// The external event's `after_commit` effect, in the handler scope's transaction: a row
    /// `a{id}@{instance}#{n}` of the emitter's tenant (`a{id}@{instance}f#{n}` once the
    /// handlers are fixed, for the replays, which run on instance 0, and late deliveries) that
    /// commits with the inbox's record of the delivery or not at all; then the handler's `outcome` (its injected failure rolls both back). The
    /// handler is observed before: a try whose transaction cannot begin (the database busy)
    /// is a try all the same.
    #[transactional]
    async fn effect(&self, e: &Shipped, outcome: Result<(), BoxError>) -> Result<(), BoxError> {
        let tenant = self.tenant.try_get().ok().map(|t| t.key().to_owned());
        if e.run == self.rec.run()
            && let Some(tenant) = tenant
        {
            let n = EFFECTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let fixed = if self.rec.fixed() { "f" } else { "" };
            let tag = format!("a{}@{}{fixed}#{n}", e.id, self.rec.instance());
            self.repo.insert(&tag, &tenant).await.map_err(|e| e.to_string())?;
        }
        outcome
    }

    /// The once-per-cluster handler's effect, in its transaction: a row `c{id}@{instance}#{n}`
    /// (`f` after the instance once the handlers are fixed, for the replays) that commits with
    /// the cluster's inbox record of the event or not at all.
    #[transactional]
    async fn cluster_effect(&self, e: &Shipped) -> Result<(), BoxError> {
        let tenant = self.tenant.try_get().ok().map(|t| t.key().to_owned());
        if e.run == self.rec.run()
            && let Some(tenant) = tenant
        {
            let n = EFFECTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let fixed = if self.rec.fixed() { "f" } else { "" };
            let tag = format!("c{}@{}{fixed}#{n}", e.id, self.rec.instance());
            self.repo.insert(&tag, &tenant).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    async fn handle(&self, run: i64, id: u32, phase: Phase, behave: Behave) -> Result<(), BoxError> {
        if run != self.rec.run() {
            return Ok(()); // an earlier run's, still in the broker
        }
        let seen = seen(&self.tenant, &self.user);
        let tx = self.transactions.current(SOURCE).map(|tx| self.rec.tx_id(&tx));
        // Fixed: a replay of a dead letter, which now succeeds.
        let fixed = self.rec.fixed();
        let behave = if fixed { Behave::Ok } else { behave };
        let mut wrote = None;
        if phase == Phase::BeforeCommit {
            // Its effect, in the transaction it runs in: kept if and only if that commits.
            let done = self.repo.insert(&format!("b{id}"), seen.tenant.as_deref().unwrap_or_default()).await;
            wrote = Some(done.is_ok());
        }
        self.rec.handled(HandlerObs { id, phase, seen, tx, behave, wrote, fixed });
        match behave {
            Behave::Ok => Ok(()),
            Behave::Fail => Err("a handler's injected failure".into()),
            Behave::Panic => panic!("a handler's injected panic"),
        }
    }
}

#[handlers]
impl Handlers {
    #[event_handler(before_commit)]
    async fn local_before(&self, e: &Local) -> Result<(), BoxError> {
        self.handle(e.run, e.id, Phase::BeforeCommit, e.spec.before_commit).await
    }

    #[event_handler]
    async fn local_after(&self, e: &Local) -> Result<(), BoxError> {
        self.handle(e.run, e.id, Phase::AfterCommit, e.spec.after_commit).await
    }

    #[event_handler(after_rollback)]
    async fn local_rollback(&self, e: &Local) -> Result<(), BoxError> {
        self.handle(e.run, e.id, Phase::AfterRollback, e.spec.after_rollback).await
    }

    #[event_handler(before_commit)]
    async fn shipped_before(&self, e: &Shipped) -> Result<(), BoxError> {
        self.handle(e.run, e.id, Phase::BeforeCommit, e.spec.before_commit).await
    }

    #[event_handler]
    async fn shipped_after(&self, e: &Shipped) -> Result<(), BoxError> {
        let outcome = self.handle(e.run, e.id, Phase::AfterCommit, e.spec.after_commit).await;
        self.effect(e, outcome).await
    }

    /// The external event's once-per-cluster handler: one instance of the run's writes its
    /// effect with each event; it fails only where the database does.
    #[event_handler(once_per_cluster)]
    async fn shipped_cluster(&self, e: &Shipped) -> Result<(), BoxError> {
        self.cluster_effect(e).await
    }

    #[event_handler(after_rollback)]
    async fn shipped_rollback(&self, e: &Shipped) -> Result<(), BoxError> {
        self.handle(e.run, e.id, Phase::AfterRollback, e.spec.after_rollback).await
    }
}
