//! Runs a scenario: builds its instances on its database and broker, starts its requests,
//! injects its faults, lets the work settle, shuts down, and reads what the database holds.
//!
//! A generation is the instances of one process: a runtime of its own (current-thread on
//! SQLite, two workers on PostgreSQL) and one App per instance. A `Stop` fault drops the
//! runtime in the middle of a request, destroying nothing, and the next generation is built on
//! the same database and broker.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection};
use tegu_core::registry::{Dependency, InjectKind};
use tegu_core::{App, DiError, ProtoDef};
use tegu_outbox::testing::MemoryBroker;
use tegu_outbox::{DeadLetter, Outbox};
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};
use tegu_test_support::proxy::{Cut, FaultProxy, Protocol};
use tegu_tx::{ErrorClass, Transactions, TxError, TxSource};

use crate::record::{DeadObs, Lives, Log, Outcome, Recorder, ScopeObs};
use crate::scenario::{CutAt, Db, End, Fault, Request, Scenario};
use crate::world::{Cx, Failure, SOURCE, User, Worker};

/// What a run gives the checker.
#[derive(Debug)]
pub struct Observed {
    /// The run's number (its rows' `run`).
    pub run: i64,
    /// What the instances observed.
    pub log: Log,
    /// The rows the database holds for the run, as `(tag, tenant)`.
    pub rows: Vec<(String, String)>,
    /// How each request ended, as its client saw it.
    pub requests: Vec<Outcome>,
    /// Each generation's object counts, and whether it was stopped (not shut down).
    pub lives: Vec<(Arc<Lives>, bool)>,
    /// Where the run stalled past its deadline, if it did.
    pub hung: Option<String>,
    /// What shutting down an instance failed with.
    pub shutdown_errors: Vec<String>,
    /// The faults that fired, as text.
    pub fired: Vec<String>,
    /// External events still in the outbox, unpublished, at the end.
    pub unpublished: i64,
}

/// How many times the outbox tries a handler with an event before the event is a dead letter.
pub const ATTEMPTS: u32 = 3;

/// How long a generation may take before the run counts as hung.
const DEADLINE: Duration = Duration::from_secs(60);

/// How long the work after the requests (handlers, the relay) may take to settle.
const SETTLE: Duration = Duration::from_secs(45);

/// SQLite's busy timeout in the scenarios, and how long a `Busy` fault holds the write lock.
const BUSY_TIMEOUT: Duration = Duration::from_millis(120);
const BUSY_HOLD: Duration = Duration::from_millis(220);

/// PostgreSQL's pool: its size, its acquire timeout, and how long a `PoolExhausted` fault
/// holds every connection.
const PG_POOL: u32 = 6;
const PG_ACQUIRE: Duration = Duration::from_millis(400);
const PG_HOLD: Duration = Duration::from_millis(600);

/// The servers of a PostgreSQL run, made once per process: a database with row-level
/// security, a role that is no superuser, proxies in front of PostgreSQL and NATS.
#[derive(Debug)]
pub struct PgEnv {
    /// The database as its superuser (bypasses row-level security): for setting up and reading.
    pub admin: String,
    /// The database as the service's role, through the proxy.
    pub url: String,
    /// NATS, through its proxy.
    pub nats: String,
    /// The proxy in front of PostgreSQL.
    pub proxy: FaultProxy,
    /// The proxy in front of NATS.
    pub nats_proxy: FaultProxy,
}

/// The schema, for both databases: a `CHECK` the bad statement breaks.
const SQLITE_SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS dp_rows (run INTEGER NOT NULL, tag TEXT NOT NULL, tenant TEXT NOT NULL, PRIMARY KEY (run, tag), CHECK (tag <> 'bad'))",
    "CREATE TABLE IF NOT EXISTS dp_tenants (tenant TEXT PRIMARY KEY, plan TEXT NOT NULL)",
    "INSERT OR IGNORE INTO dp_tenants VALUES ('t0', 'plan-t0'), ('t1', 'plan-t1'), ('t2', 'plan-t2')",
];

const PG_SCHEMA: &[&str] = &[
    "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dp_app') THEN CREATE ROLE dp_app LOGIN; END IF; END $$",
    "CREATE TABLE IF NOT EXISTS dp_rows (run BIGINT NOT NULL, tag TEXT NOT NULL, tenant TEXT NOT NULL, PRIMARY KEY (run, tag), CHECK (tag <> 'bad'))",
    "CREATE TABLE IF NOT EXISTS dp_tenants (tenant TEXT PRIMARY KEY, plan TEXT NOT NULL)",
    "INSERT INTO dp_tenants VALUES ('t0', 'plan-t0'), ('t1', 'plan-t1'), ('t2', 'plan-t2') ON CONFLICT DO NOTHING",
    "ALTER TABLE dp_rows ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dp_tenants ENABLE ROW LEVEL SECURITY",
    "DROP POLICY IF EXISTS dp_rows_tenant ON dp_rows",
    "CREATE POLICY dp_rows_tenant ON dp_rows USING (tenant = current_setting('app.tenant', true)) WITH CHECK (tenant = current_setting('app.tenant', true))",
    "DROP POLICY IF EXISTS dp_tenants_tenant ON dp_tenants",
    "CREATE POLICY dp_tenants_tenant ON dp_tenants USING (tenant = current_setting('app.tenant', true))",
    "GRANT ALL ON dp_rows, dp_tenants TO dp_app",
    "GRANT CREATE, USAGE ON SCHEMA public TO dp_app",
];

impl PgEnv {
    /// The process's: set up at the first call; `None` (with why) without a server.
    pub fn get() -> Result<&'static PgEnv, String> {
        static ENV: OnceLock<Result<PgEnv, String>> = OnceLock::new();
        ENV.get_or_init(PgEnv::make).as_ref().map_err(Clone::clone)
    }

    fn make() -> Result<PgEnv, String> {
        use tegu_test_support::servers;
        // A database, a stream and consumers of this process's own: runs may go on at once.
        let admin = servers::postgres_database(&format!("datapath_{}", std::process::id())).map_err(str::to_owned)?;
        let nats = servers::nats().map_err(str::to_owned)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&admin).await.map_err(|e| e.to_string())?;
            for ddl in PG_SCHEMA {
                sqlx::query(ddl).execute(&mut conn).await.map_err(|e| format!("{ddl}: {e}"))?;
            }
            Ok::<(), String>(())
        })?;
        let pg_addr = address(&admin)?;
        let nats_addr = address(nats)?;
        let proxy = FaultProxy::start(pg_addr, Protocol::Postgres).map_err(|e| e.to_string())?;
        let nats_proxy = FaultProxy::start(nats_addr, Protocol::Opaque).map_err(|e| e.to_string())?;
        let database = admin.rsplit('/').next().unwrap_or("datapath");
        let url = format!("postgres://dp_app@{}/{database}?sslmode=disable", proxy.addr());
        let nats = format!("nats://{}", nats_proxy.addr());
        Ok(PgEnv { admin, url, nats, proxy, nats_proxy })
    }
}

/// `host:port` of a URL, resolved.
fn address(url: &str) -> Result<std::net::SocketAddr, String> {
    let rest = url.split("://").nth(1).ok_or_else(|| format!("no scheme in {url}"))?;
    let host = rest.split('/').next().unwrap_or(rest);
    let host = host.rsplit('@').next().unwrap_or(host);
    use std::net::ToSocketAddrs;
    host.to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or_else(|| format!("no address for {url}"))
}

/// A run number no earlier run of this database used.
fn run_number() -> i64 {
    static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (now.as_micros() as i64) * 16 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 16
}

/// Where a run's pieces are: its SQLite file or PostgreSQL, its in-memory broker.
struct Place {
    db: Db,
    seed: u64,
    sqlite: Option<PathBuf>,
    broker: MemoryBroker,
    /// Each instance's handle of the in-memory broker (its durable consumer), kept from one
    /// generation to the next as a NATS consumer's name is.
    consumers: Vec<MemoryBroker>,
    pg: Option<&'static PgEnv>,
    _dir: Option<TempDir>,
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `scenario`.
///
/// # Errors
///
/// When its database cannot be had (no PostgreSQL server), or its file not made.
pub fn run(scenario: &Scenario) -> Result<Observed, String> {
    // The PostgreSQL runs of a process share its proxies (their faults) and its NATS stream and
    // consumers (a consumer shared by two runs' Apps would hand each some of the other's
    // events): one at a time (the tests run on threads of one process).
    static POSTGRES_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = (scenario.db == Db::Postgres).then(|| POSTGRES_RUNS.lock().unwrap_or_else(|e| e.into_inner()));
    let run = run_number();
    let place = match scenario.db {
        Db::Sqlite => {
            let dir = std::env::temp_dir().join(format!("tegu-datapath-{}-{run}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            Place {
                db: Db::Sqlite,
                seed: scenario.seed,
                sqlite: Some(dir.join("db.sqlite")),
                broker: MemoryBroker::new(),
                consumers: Vec::new(),
                pg: None,
                _dir: Some(TempDir(dir)),
            }
        }
        Db::Postgres => Place {
            db: Db::Postgres,
            seed: scenario.seed,
            sqlite: None,
            broker: MemoryBroker::new(),
            consumers: Vec::new(),
            pg: Some(PgEnv::get()?),
            _dir: None,
        },
    };
    let mut place = place;
    place.consumers = (0..scenario.instances).map(|_| place.broker.instance()).collect();
    let place = place;
    let recorder = Recorder::new(run);
    let mut requests = vec![Outcome::Unknown; scenario.requests.len()];
    let mut lives = Vec::new();
    let mut shutdown_errors = Vec::new();
    let mut fired = Vec::new();
    let mut hung = None;
    let mut unpublished = 0;
    if let Some(pg) = place.pg {
        pg.proxy.clear_cuts();
        pg.proxy.set_down(false);
        pg.nats_proxy.set_down(false);
        for fault in &scenario.faults {
            if let Fault::CutCommit { nth, at } = fault {
                let at = match at {
                    CutAt::BeforeSend => Cut::BeforeSend,
                    CutAt::AfterAnswer => Cut::AfterAnswer,
                };
                pg.proxy.cut_commit(u64::from(*nth), at);
            }
        }
    }
    let commits_before = place.pg.map_or(0, |pg| pg.proxy.cuts().len());
    let mut next = 0usize;
    let mut generation = 0usize;
    // A stopped generation always has a successor: it finds the data and the outbox as the
    // stopped one left them.
    let mut last_stopped = false;
    while next < scenario.requests.len() || generation == 0 || last_stopped {
        let runtime = match place.db {
            Db::Sqlite => tokio::runtime::Builder::new_current_thread().enable_all().build(),
            Db::Postgres => tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build(),
        }
        .map_err(|e| e.to_string())?;
        let gen_rec = recorder.for_instance(0, generation);
        let outcome = runtime.block_on(async {
            tokio::time::timeout(
                DEADLINE,
                generation_run(scenario, &place, &recorder, generation, next, &mut requests, &mut fired),
            )
            .await
        });
        let stopped = match outcome {
            Ok(Ok(GenEnd::Stopped { at, apps })) => {
                // The process is gone: its tasks dropped where they were, nothing shut down.
                // A task a worker is polling still runs to its next await: no error it records
                // from now on is the process's. On most seeds the runtime goes before the Apps,
                // as a process's does; on the others the Apps go first (`apps_outlived`).
                gen_rec.lives()[generation].stopped.store(true, std::sync::atomic::Ordering::Release);
                if apps_outlived(place.seed) {
                    // The Apps dropped without `shutdown()` while the runtime's workers still
                    // poll their tasks: an event its subscription receives then is refused.
                    drop(apps);
                    runtime.shutdown_background();
                } else {
                    runtime.shutdown_timeout(Duration::from_secs(10));
                    drop(apps);
                }
                next = at + 1;
                true
            }
            Ok(Ok(GenEnd::Done { apps })) => {
                let settled = runtime.block_on(async {
                    let settling = settle(scenario, &place, &apps, &recorder, &requests, &mut shutdown_errors);
                    tokio::time::timeout(DEADLINE, settling).await
                });
                match settled {
                    Ok(left) => unpublished = left,
                    Err(_) => {
                        hung = Some("settling the work after the requests (handlers, the relay, shutdown)".into())
                    }
                }
                runtime.shutdown_background();
                next = scenario.requests.len();
                false
            }
            Ok(Err(e)) => {
                runtime.shutdown_background();
                return Err(e);
            }
            Err(_) => {
                hung = Some(format!("generation {generation}: the requests did not end within {DEADLINE:?}"));
                runtime.shutdown_background();
                next = scenario.requests.len();
                false
            }
        };
        lives.push((gen_rec.lives()[generation].clone(), stopped));
        last_stopped = stopped;
        generation += 1;
        if hung.is_some() {
            break;
        }
    }
    if let Some(pg) = place.pg {
        for cut in pg.proxy.cuts().into_iter().skip(commits_before) {
            fired.push(format!("COMMIT {} cut {:?}", cut.commit, cut.at));
        }
        pg.proxy.clear_cuts();
        pg.proxy.set_down(false);
        pg.nats_proxy.set_down(false);
    }
    let rows = read_rows(&place, run)?;
    Ok(Observed { run, log: recorder.take(), rows, requests, lives, hung, shutdown_errors, fired, unpublished })
}

/// How a generation ended.
enum GenEnd {
    /// Every request it ran ended; its Apps, to settle and shut down.
    Done { apps: Vec<App> },
    /// Stopped in request `at`.
    Stopped { at: usize, apps: Vec<App> },
}

/// Builds instance `instance` of generation `generation`.
async fn build(place: &Place, recorder: &Recorder, instance: u8, generation: usize) -> Result<App, String> {
    let mut builder = App::builder()
        .lineage::<User>()
        .override_with(recorder.for_instance(instance, generation))
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 20)
        .config_value("outbox.batch", 50)
        .config_value("outbox.attempts", ATTEMPTS)
        .config_value("outbox.backoff_ms", 1);
    match place.db {
        Db::Sqlite => {
            let file = place.sqlite.as_ref().expect("a SQLite run has its file");
            let options = SqliteConnectOptions::new()
                .filename(file)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(BUSY_TIMEOUT);
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(options)
                .await
                .map_err(|e| format!("opening {}: {e}", file.display()))?;
            for ddl in SQLITE_SCHEMA {
                sqlx::query(ddl).execute(&pool).await.map_err(|e| format!("{ddl}: {e}"))?;
            }
            builder = builder
                .register(data_source::<Sqlite>(pool))
                .link::<OutboxTable<Sqlite>>()
                .register(place.consumers[usize::from(instance)].proto());
        }
        Db::Postgres => {
            let pg = place.pg.expect("a PostgreSQL run has its servers");
            let pool = PgPoolOptions::new()
                .max_connections(PG_POOL)
                .acquire_timeout(PG_ACQUIRE)
                .connect(&pg.url)
                .await
                .map_err(|e| format!("connecting to PostgreSQL: {e}"))?;
            builder = builder
                .register(pg_data_source(pool, resolves_commits(place.seed)))
                .link::<OutboxTable<Postgres>>()
                .register(tegu_nats::JetStream::proto())
                .config_value("nats.url", pg.nats.clone())
                .config_value("nats.stream", format!("DATAPATH_{}", std::process::id()))
                .config_value("nats.subjects", format!("datapath{}", std::process::id()))
                .config_value("nats.consumer", format!("datapath-{}-{instance}", std::process::id()));
        }
    }
    builder.build().await.map_err(|e| format!("building instance {instance}: {e}"))
}

/// The data source `database` on `pool`.
fn data_source<DB: tegu_sqlx::Backend>(pool: sqlx::Pool<DB>) -> ProtoDef
where
    Database<DB>: tegu_core::Proto,
{
    ProtoDef::singleton::<Database<DB>>(move |r| Ok(Database::new(SOURCE, pool.clone(), r.arc::<Transactions>(0)?)))
        .name(SOURCE)
        .dep(Dependency::new::<Transactions>(InjectKind::Arc, None))
        .provides::<Database<DB>, dyn TxSource>(|db| db)
}

/// Whether the PostgreSQL data source of the scenario of `seed` resolves a lost `COMMIT`
/// answer (`resolve_commits`): every other seed, so that both ways are checked.
pub fn resolves_commits(seed: u64) -> bool {
    seed.is_multiple_of(2)
}

/// Whether a stop in the scenario of `seed` drops the Apps while their runtime still runs (a
/// program that drops an App without `shutdown()`), rather than the runtime first as a process
/// does: seeds 2 and 3 of every 4, so that both go with either `resolve_commits`. What the
/// stopped Apps' subscriptions receive then must come again, not be taken as handled.
pub fn apps_outlived(seed: u64) -> bool {
    seed % 4 >= 2
}

/// The PostgreSQL data source, with the tenant as the transactions' `app.tenant`.
fn pg_data_source(pool: sqlx::PgPool, resolve: bool) -> ProtoDef {
    ProtoDef::singleton::<Database<Postgres>>(move |r| {
        let db = Database::new(SOURCE, pool.clone(), r.arc::<Transactions>(0)?).resolve_commits(resolve);
        db.with_tenant_setting("app.tenant")
    })
    .name(SOURCE)
    .dep(Dependency::new::<Transactions>(InjectKind::Arc, None))
    .provides::<Database<Postgres>, dyn TxSource>(|db| db)
}

/// Runs requests from `first` on a new generation, until they are all done or a `Stop` fault
/// stops it.
async fn generation_run(
    scenario: &Scenario,
    place: &Place,
    recorder: &Recorder,
    generation: usize,
    first: usize,
    outcomes: &mut [Outcome],
    fired: &mut Vec<String>,
) -> Result<GenEnd, String> {
    if generation > 0 {
        // A process built again after a stop finds the broker up: a `BrokerDown` ends with
        // the stop (an instance that cannot reach its broker at start-up does not start).
        broker_down(place, false);
    }
    let mut apps = Vec::new();
    for instance in 0..scenario.instances {
        apps.push(build(place, recorder, instance, generation).await?);
    }
    // Each instance's consumer exists before the first request: a consumer made for the first
    // time starts with the events published from then on (an instance that did not exist yet
    // is not owed what came before it).
    let until = Instant::now() + Duration::from_secs(10);
    for app in &apps {
        let Ok(outbox) = app.get_object::<Outbox>() else { continue };
        while outbox.counts().subscriptions == 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let mut running: Vec<(usize, tokio::task::JoinHandle<Outcome>)> = Vec::new();
    let mut holders: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    for index in first..scenario.requests.len() {
        let request = &scenario.requests[index];
        if !request.overlap {
            for (i, handle) in running.drain(..) {
                outcomes[i] = handle.await.unwrap_or(Outcome::Panicked);
            }
        }
        // The broker's down time ends once the requests it spans have ended.
        for fault in &scenario.faults {
            if let Fault::BrokerDown { to, .. } = fault
                && usize::from(*to) + 1 == index
            {
                broker_down(place, false);
            }
        }
        let mut stop = None;
        for fault in scenario.faults.iter().filter(|f| starts_at(f) == Some(index)) {
            match *fault {
                Fault::Busy { .. } => {
                    if let Some(file) = &place.sqlite {
                        holders.push(hold_sqlite(file.clone()));
                        fired.push(format!("request {index}: the write lock held by another connection"));
                    }
                }
                Fault::PoolExhausted { .. } => {
                    if let Ok(db) = apps[0].get_object::<Database<Postgres>>() {
                        holders.push(hold_pool(db.pool().clone()));
                        fired.push(format!("request {index}: the pool's connections all taken"));
                    }
                }
                Fault::BrokerDown { .. } => {
                    broker_down(place, true);
                    fired.push(format!("request {index}: the broker down"));
                }
                Fault::BrokerFails { .. } => {
                    match place.pg {
                        Some(pg) => pg.nats_proxy.cut_all(),
                        None => place.broker.fail_next(1),
                    }
                    fired.push(format!("request {index}: the broker fails once"));
                }
                Fault::BrokerRestart { .. } => {
                    if place.pg.is_none() {
                        place.broker.forget();
                        fired.push(format!("request {index}: the broker restarted without its store"));
                    }
                }
                Fault::Stop { after_ms, .. } => stop = Some(after_ms),
                Fault::CutCommit { .. } => {}
            }
        }
        let app = apps[usize::from(request.instance) % apps.len()].clone();
        running.push((index, tokio::spawn(one_request(app, index as u16, request.clone()))));
        if let Some(after_ms) = stop {
            tokio::time::sleep(Duration::from_millis(u64::from(after_ms))).await;
            fired.push(format!("request {index}: the process stopped {after_ms} ms into it"));
            // What ended before the stop ended; the rest is unknown to its clients.
            for (i, handle) in running.drain(..) {
                if handle.is_finished() {
                    outcomes[i] = handle.await.unwrap_or(Outcome::Panicked);
                }
            }
            for holder in holders.drain(..) {
                holder.abort();
            }
            return Ok(GenEnd::Stopped { at: index, apps });
        }
    }
    for (i, handle) in running {
        outcomes[i] = handle.await.unwrap_or(Outcome::Panicked);
    }
    for holder in holders {
        let _ = holder.await;
    }
    broker_down(place, false);
    Ok(GenEnd::Done { apps })
}

/// The request a fault begins at.
fn starts_at(fault: &Fault) -> Option<usize> {
    match *fault {
        Fault::Busy { request }
        | Fault::PoolExhausted { request }
        | Fault::BrokerFails { request }
        | Fault::BrokerRestart { request }
        | Fault::Stop { request, .. }
        | Fault::BrokerDown { from: request, .. } => Some(usize::from(request)),
        Fault::CutCommit { .. } => None,
    }
}

fn broker_down(place: &Place, down: bool) {
    match place.pg {
        Some(pg) => pg.nats_proxy.set_down(down),
        None => place.broker.set_down(down),
    }
}

/// Another connection takes SQLite's write lock and holds it past the busy timeout.
fn hold_sqlite(file: PathBuf) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut conn) = SqliteConnectOptions::new().filename(&file).busy_timeout(BUSY_TIMEOUT).connect().await
        else {
            return;
        };
        if sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.is_ok() {
            tokio::time::sleep(BUSY_HOLD).await;
            let _ = sqlx::query("ROLLBACK").execute(&mut conn).await;
        }
    })
}

/// Takes every connection of the pool for a while.
fn hold_pool(pool: sqlx::PgPool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut held = Vec::new();
        let until = Instant::now() + PG_HOLD;
        while held.len() < PG_POOL as usize && Instant::now() < until {
            if let Ok(conn) = pool.acquire().await {
                held.push(conn);
            }
        }
        tokio::time::sleep_until(until.into()).await;
    })
}

/// One request: a scope of its tenant and user on its instance, its handler's operations,
/// failed (as tegu-http fails a 4xx or 5xx answer) when the handler fails.
async fn one_request(app: App, index: u16, request: Request) -> Outcome {
    let worker = match app.get_object::<Worker>() {
        Ok(worker) => worker,
        Err(_) => return Outcome::Failed,
    };
    let rec = app.get_object::<Recorder>().ok();
    let builder =
        app.scope().tenant(format!("t{}", request.tenant)).and_then(|b| b.with(User(format!("u{}", request.user))));
    let Ok(builder) = builder else { return Outcome::Failed };
    let cx = Cx { request: index, scope: u32::from(index), calls: Vec::new(), detached: false, outer_calls: 0 };
    let Request { body, end, .. } = request;
    let work = async move {
        let done = worker.exec(&body, cx).await;
        let done = match end {
            End::Ok => done,
            End::Err => done.and(Err(Failure::Injected)),
            End::Panic => panic!("a request's injected panic"),
        };
        if done.is_err() {
            tegu_core::scope::fail_scope();
        }
        done
    };
    let ran = tokio::spawn(builder.try_run(work)).await;
    let outcome = match ran {
        Ok(Ok(Ok(()))) => Outcome::Ok,
        Ok(Ok(Err(_))) => Outcome::Failed,
        Ok(Err(error)) => {
            let class = class_of(&error);
            if let Some(rec) = &rec {
                match class {
                    Some(class) => rec.error(index, class, error.to_string()),
                    None => rec.error_text(index, error.to_string()),
                }
            }
            if class.is_some_and(unknown_outcome) { Outcome::Unknown } else { Outcome::Failed }
        }
        Err(_) => Outcome::Panicked,
    };
    if let Some(rec) = &rec {
        rec.scope(ScopeObs { id: u32::from(index), parent: None, request: index, outcome });
    }
    outcome
}

/// Whether `class` says that a commit's outcome is not known.
pub fn unknown_outcome(class: ErrorClass) -> bool {
    class == ErrorClass::OutcomeUnknown
}

/// The class of the transaction error behind a completion phase's failure.
pub fn class_of(error: &DiError) -> Option<ErrorClass> {
    type Shared = Arc<dyn std::error::Error + Send + Sync + 'static>;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(mut e) = source {
        // A source held in an `Arc` (as `DiError`'s are) shows as the `Arc`: look inside.
        while let Some(inner) = e.downcast_ref::<Shared>() {
            e = &**inner;
        }
        if let Some(tx) = e.downcast_ref::<TxError>() {
            return Some(tx.class());
        }
        source = e.source();
    }
    None
}

/// After the requests: the scopes' background work ended, the outbox drained, and every
/// committed external event handled by every instance (as the model reads the database now),
/// or `SETTLE` passed; then every instance shut down. What the outbox still holds unpublished.
async fn settle(
    scenario: &Scenario,
    place: &Place,
    apps: &[App],
    recorder: &Recorder,
    requests: &[Outcome],
    shutdown_errors: &mut Vec<String>,
) -> i64 {
    let until = Instant::now() + SETTLE;
    while apps.iter().any(|a| a.scopes_ending() > 0) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut left = 0;
    if scenario.has_external() {
        loop {
            left = unpublished(place, apps).await;
            let delivering = apps.iter().any(|a| a.scopes_ending() > 0);
            let owed = if left == 0 && !delivering {
                let rows = rows_now(place, recorder.run()).await.unwrap_or_default();
                let now = Observed {
                    run: recorder.run(),
                    log: recorder.peek(),
                    rows,
                    requests: requests.to_vec(),
                    lives: Vec::new(),
                    hung: None,
                    shutdown_errors: Vec::new(),
                    fired: Vec::new(),
                    unpublished: 0,
                };
                crate::check::deliveries_owed(scenario, &now)
            } else {
                1
            };
            if owed == 0 || Instant::now() >= until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if scenario.has_external() {
        replay_dead_letters(apps, recorder, until, failing_after_commit(scenario)).await;
    }
    for app in apps {
        if let Err(e) = app.shutdown().await {
            shutdown_errors.push(e.to_string());
        }
    }
    left
}

/// Once the handlers' retries are over (the run's dead letters and every instance's counts of
/// deliveries, retries and dead letters the same in two reads 100 ms apart: a dead letter whose
/// write the store refused a while is still tried), records the run's dead letters, fixes the
/// handlers and replays each through the first instance, and records what is left.
async fn replay_dead_letters(apps: &[App], recorder: &Recorder, until: Instant, expected: bool) {
    let Ok(outbox) = apps[0].get_object::<Outbox>() else { return };
    let run = recorder.run();
    let read = async || -> (Vec<DeadObs>, Vec<(u64, u64, u64)>) {
        let letters = outbox.dead_letters(0, 10_000).await.unwrap_or_default();
        let counts = apps
            .iter()
            .filter_map(|app| app.get_object::<Outbox>().ok())
            .map(|outbox| outbox.counts())
            .map(|c| (c.delivered, c.retries, c.dead_letters))
            .collect();
        (letters.iter().filter_map(|letter| dead_obs(letter, run)).collect(), counts)
    };
    let mut seen = read().await;
    // Without a failing handler no dead letter is expected: one read says whether one came.
    loop {
        if !expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let again = read().await;
        if again == seen || Instant::now() >= until {
            break;
        }
        seen = again;
    }
    let dead = seen.0;
    recorder.fix();
    let mut replays = Vec::new();
    for letter in &dead {
        // A replay whose handler's commit failed (a COMMIT cut) leaves a new dead letter in its
        // place: replayed once more, as an operator would.
        let mut number = letter.number;
        let answer = loop {
            match outbox.replay(number).await {
                Ok(tegu_outbox::Replayed::FailedAgain(again)) if again.len() == 1 && number == letter.number => {
                    number = again[0];
                }
                Ok(replayed) => break format!("{replayed:?}"),
                Err(error) => break format!("failed: {error}"),
            }
        };
        replays.push((letter.number, answer));
    }
    let left = read().await.0.iter().filter(|letter| !letter.of_cluster()).count();
    recorder.dead_letters(dead, replays, left);
}

/// Whether the scenario has an external event whose `after_commit` handler fails: a dead
/// letter to wait for.
fn failing_after_commit(scenario: &Scenario) -> bool {
    fn any(body: &[crate::scenario::Op]) -> bool {
        use crate::scenario::Op;
        body.iter().any(|op| match op {
            Op::Emit(spec) => spec.external && spec.after_commit != crate::scenario::Behave::Ok,
            Op::Call { body, .. } | Op::Retried { body, .. } | Op::Spawn { body, .. } | Op::ActAs { body, .. } => {
                any(body)
            }
            _ => false,
        })
    }
    scenario.requests.iter().any(|r| any(&r.body))
}

/// A dead letter of run `run`, as the model reads it; `None` for another run's.
fn dead_obs(letter: &DeadLetter, run: i64) -> Option<DeadObs> {
    #[derive(serde::Deserialize)]
    struct Numbers {
        run: i64,
        id: u32,
    }
    let numbers: Option<Numbers> = serde_json::from_slice(&letter.payload).ok();
    if numbers.as_ref().is_some_and(|n| n.run != run) {
        return None;
    }
    Some(DeadObs {
        number: letter.id,
        event: numbers.map(|n| n.id),
        why: letter.why.kind(),
        handler: letter.why.handler().map(str::to_owned),
        attempts: letter.attempts,
        receiver: letter.receiver.clone(),
        error: letter.error.clone(),
    })
}

/// Rows of the outbox not published yet.
async fn unpublished(place: &Place, apps: &[App]) -> i64 {
    let query = "SELECT COUNT(*) FROM di_outbox WHERE published_at IS NULL";
    match place.db {
        Db::Sqlite => match apps[0].get_object::<Database<Sqlite>>() {
            Ok(db) => sqlx::query_scalar(query).fetch_one(db.pool()).await.unwrap_or(-1),
            Err(_) => -1,
        },
        Db::Postgres => match apps[0].get_object::<Database<Postgres>>() {
            Ok(db) => sqlx::query_scalar(query).fetch_one(db.pool()).await.unwrap_or(-1),
            Err(_) => -1,
        },
    }
}

/// The rows the database holds for run `run`, read past row-level security.
fn read_rows(place: &Place, run: i64) -> Result<Vec<(String, String)>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(rows_now(place, run))
}

async fn rows_now(place: &Place, run: i64) -> Result<Vec<(String, String)>, String> {
    let query = "SELECT tag, tenant FROM dp_rows WHERE run = $1 ORDER BY tag";
    match place.db {
        Db::Sqlite => {
            let file = place.sqlite.as_ref().expect("a SQLite run has its file");
            let mut conn = SqliteConnectOptions::new()
                .filename(file)
                .busy_timeout(Duration::from_secs(5))
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query_as(query).bind(run).fetch_all(&mut conn).await.map_err(|e| e.to_string())
        }
        Db::Postgres => {
            let pg = place.pg.expect("a PostgreSQL run has its servers");
            let mut conn = sqlx::PgConnection::connect(&pg.admin).await.map_err(|e| e.to_string())?;
            sqlx::query_as(query).bind(run).fetch_all(&mut conn).await.map_err(|e| e.to_string())
        }
    }
}
