//! Two instances of the example's binary on one PostgreSQL database and one NATS server, as a
//! load balancer would run them: events reach both, once; an instance killed between its
//! commit and its relay loses nothing; ten thousand creates and completions across both, while
//! NATS loses its store and PostgreSQL restarts, are all stored as acknowledged, relayed and
//! counted once by each; a request's tenant and trace follow its events to the other instance. Real servers (`tegu_test_support::servers`): skipped with the reason
//! printed where there are none, except in CI.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::Binary;
use tegu_test_support::http_client::{send, send_json};
use tegu_test_support::servers::Own;
use tegu_test_support::until;
use todos::advice::StatsBody;

/// The database and the NATS stream of one test (and the servers, if they are its own).
struct Cluster {
    db: String,
    nats: String,
    stream: String,
    own: Option<Servers>,
}

/// A PostgreSQL cluster and a NATS server of one test's own, which it restarts.
struct Servers {
    postgres: std::sync::Arc<std::sync::Mutex<Own>>,
    nats: std::sync::Arc<std::sync::Mutex<Own>>,
}

impl Cluster {
    fn new(test: &str) -> Option<Cluster> {
        let servers = tegu_test_support::servers::nats().and_then(|nats| {
            let db = tegu_test_support::servers::postgres_database(&format!("cluster_{}_{test}", std::process::id()))?;
            Ok((db, nats.to_owned()))
        });
        match servers {
            Ok((db, nats)) => Some(Cluster { db, nats, stream: format!("C{}_{test}", std::process::id()), own: None }),
            Err(why) => {
                tegu_test_support::servers::skip(test, why);
                None
            }
        }
    }

    /// On servers of its own, which the test restarts.
    fn own(test: &str) -> Option<Cluster> {
        let servers = Own::postgres(test).and_then(|postgres| Ok((postgres, Own::nats(test)?)));
        match servers {
            Ok((postgres, nats)) => {
                let db = postgres.database("todos");
                let url = nats.url();
                let own = Servers {
                    postgres: std::sync::Arc::new(std::sync::Mutex::new(postgres)),
                    nats: std::sync::Arc::new(std::sync::Mutex::new(nats)),
                };
                Some(Cluster { db, nats: url, stream: format!("C{}_{test}", std::process::id()), own: Some(own) })
            }
            Err(why) => {
                tegu_test_support::servers::skip(test, &why);
                None
            }
        }
    }

    /// An instance named `name` (its NATS consumer), with `more` settings.
    fn start(&self, name: &str, more: &[(&str, &str)]) -> Binary {
        self.start_as(name, more, false)
    }

    /// As [`start`](Self::start), its log lines collected ([`Binary::logs`]).
    fn start_logged(&self, name: &str) -> Binary {
        self.start_as(name, &[], true)
    }

    fn start_as(&self, name: &str, more: &[(&str, &str)], logged: bool) -> Binary {
        let subjects = self.stream.to_lowercase();
        let mut env = vec![
            ("TODOS_DB__URL", self.db.as_str()),
            ("TODOS_NATS__URL", self.nats.as_str()),
            ("TODOS_NATS__CONSUMER", name),
            ("TODOS_NATS__STREAM", self.stream.as_str()),
            ("TODOS_NATS__SUBJECTS", subjects.as_str()),
            ("TODOS_OUTBOX__POLL_MS", "200"),
            ("TODOS_HTTP__DRAIN_DELAY_SECS", "0"),
        ];
        env.extend_from_slice(more);
        if logged { Binary::start_logged(&env) } else { Binary::start_with(&env) }
    }

    /// Rows of `table`, read behind the instances' backs.
    async fn count(&self, table: &str) -> i64 {
        let pool = sqlx::PgPool::connect(&self.db).await.unwrap();
        let count = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(&pool).await.unwrap();
        pool.close().await;
        count
    }
}

async fn stats(addr: SocketAddr) -> (u64, u64) {
    let reply = send(addr, "GET", "/stats", &[], b"").await;
    let body: StatsBody = serde_json::from_str(&reply.body).unwrap();
    (body.created, body.completed)
}

/// Waits until the instance is ready: its database answers and it is subscribed to NATS.
async fn ready(addr: SocketAddr) {
    until("the instance to be ready", WITHIN, async || {
        send(addr, "GET", "/health/ready", &[], b"").await.status == 200
    })
    .await;
}

/// The two tests of ten thousand requests, one at a time: beside each other on two cores,
/// each waited past its deadlines.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(60);

/// Creates a todo of `user` on `addr`, and marks it done: its id.
async fn create_and_complete(addr: SocketAddr, user: &str) -> i64 {
    let reply = send_json(addr, "POST", &format!("/users/{user}/todos"), r#"{"title":"t"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let id = serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()["id"].as_i64().unwrap();
    let reply = send_json(addr, "PATCH", &format!("/users/{user}/todos/{id}"), r#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_todo_completed_on_one_instance_is_counted_once_on_each() {
    let Some(cluster) = Cluster::new("counted_once") else { return };
    let (a, b) = (cluster.start("a", &[]), cluster.start("b", &[]));
    ready(a.addr).await;
    ready(b.addr).await;
    create_and_complete(a.addr, "ada").await;
    until("B to count A's todo", WITHIN, async || stats(b.addr).await == (1, 1)).await;
    until("A to count its own todo", WITHIN, async || stats(a.addr).await == (1, 1)).await;
    // Both instances read the same database.
    let reply = send(b.addr, "GET", "/users/ada/todos", &[], b"").await;
    assert!(reply.body.contains(r#""done":true"#), "{reply:?}");
    marker(&[a.addr, b.addr], (1, 1)).await;
    // The relay marks a row published once the broker has acknowledged it, which may be after
    // the instances counted it: every row is marked, soon.
    until("the outbox to empty", WITHIN, async || cluster.count("di_outbox WHERE published_at IS NULL").await == 0)
        .await;
}

/// The caller's trace context of the tests of a request's lineage (W3C's example).
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// Its trace id.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The counts of `tenant` on `addr` (`GET /stats` with `x-tenant`): (created, completed).
async fn tenant_stats(addr: SocketAddr, tenant: &str) -> (u64, u64) {
    let reply = send(addr, "GET", "/stats", &[("x-tenant", tenant)], b"").await;
    let body: StatsBody = serde_json::from_str(&reply.body).unwrap();
    let counts = body.tenant.expect("the tenant's counts, for a request that names it");
    assert_eq!(counts.key, tenant);
    (counts.created, counts.completed)
}

/// Waits until `binary` logged a line that `wanted` holds of: that line.
async fn logged(binary: &Binary, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let mut found = None;
    until(what, WITHIN, async || {
        found = binary.logs.lines().into_iter().find(|line| wanted(line));
        found.is_some()
    })
    .await;
    found.unwrap()
}

/// The log line of `TodoStats`'s handler `message` for todo `id`: in the handler's span.
fn handler_line(message: &str, id: i64) -> impl Fn(&str) -> bool {
    let (message, todo) = (format!("{message} "), format!(" todo={id}"));
    move |line| line.contains("event handler{") && line.contains(&message) && line.ends_with(&todo)
}

/// A request's lineage follows its events to the other instance: A serves a request of tenant
/// `acme` in the caller's trace (`x-tenant`, `traceparent`), its events go through A's outbox
/// and NATS to B, whose handler counts the completion for `acme` (its `ContextRef<Tenant>`,
/// seeded from the event's headers) and logs it in a span with the request's `trace_id`,
/// `tenant` and `request_id`. Forged values go nowhere: a tenant that is no key is answered 400, a traceparent
/// that is none starts a trace of its own, and neither is written to A's log as it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_tenant_and_trace_follow_its_events_to_the_other_instance() {
    let Some(cluster) = Cluster::new("lineage") else { return };
    let (a, b) = (cluster.start_logged("a"), cluster.start_logged("b"));
    ready(a.addr).await;
    ready(b.addr).await;
    let json = ("content-type", "application/json");
    let traced = [json, ("traceparent", TRACEPARENT), ("x-tenant", "acme")];
    let reply = send(a.addr, "POST", "/users/ada/todos", &traced, br#"{"title":"traced"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let id = serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()["id"].as_i64().unwrap();
    let patch = [json, ("traceparent", TRACEPARENT), ("x-tenant", "acme"), ("x-request-id", "complete-1")];
    let reply = send(a.addr, "PATCH", &format!("/users/ada/todos/{id}"), &patch, br#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");

    // B counted it for acme: its handler's scope had the request's tenant.
    until("B to count acme's todo", WITHIN, async || tenant_stats(b.addr, "acme").await == (1, 1)).await;
    assert_eq!(tenant_stats(b.addr, "globex").await, (0, 0));
    assert_eq!(stats(b.addr).await, (1, 1));
    // B's handler logged in a span with the request's trace id, tenant and id (Debug-quoted);
    // and so did A's, from the same event through NATS.
    for (instance, binary) in [("B", &b), ("A", &a)] {
        let what = format!("{instance}'s handler to log the completion");
        let line = logged(binary, &what, handler_line("todo completed counted", id)).await;
        for field in
            [format!("trace_id=\"{TRACE_ID}\""), "tenant=\"acme\"".to_owned(), "request_id=\"complete-1\"".to_owned()]
        {
            assert!(line.contains(&field), "{instance}: {field} in {line}");
        }
    }
    // Another tenant does not see acme's todo, on either instance.
    for addr in [a.addr, b.addr] {
        let reply = send(addr, "GET", "/users/ada/todos", &[("x-tenant", "globex")], b"").await;
        assert_eq!((reply.status, reply.body.as_str()), (200, "[]"));
    }

    // A forged tenant: refused before any handler.
    let forged_tenant = "acme\" admin=true";
    let reply =
        send(a.addr, "POST", "/users/ada/todos", &[json, ("x-tenant", forged_tenant)], br#"{"title":"x"}"#).await;
    assert_eq!(reply.status, 400, "{reply:?}");
    // A forged traceparent: ignored, the request served in a trace of its own.
    let forged_trace = "00-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-00f067aa0ba902b7-01";
    let headers = [json, ("traceparent", forged_trace), ("x-tenant", "acme")];
    let reply = send(a.addr, "POST", "/users/ada/todos", &headers, br#"{"title":"untraced"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let second = serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()["id"].as_i64().unwrap();
    let line = logged(&b, "B's handler to log the second create", handler_line("todo created counted", second)).await;
    assert!(line.contains("tenant=\"acme\""), "{line}");
    let trace = line.split("trace_id=\"").nth(1).and_then(|rest| rest.get(..32)).unwrap_or_else(|| panic!("{line}"));
    assert!(trace != TRACE_ID && trace.bytes().all(|b| b.is_ascii_hexdigit()), "a trace of its own: {line}");
    until("B to count acme's second todo", WITHIN, async || tenant_stats(b.addr, "acme").await == (2, 1)).await;

    // A logged the refusal, and neither forged value as it came.
    let lines = a.logs.lines();
    assert!(lines.iter().any(|l| l.contains("a request was refused: its tenant could not be read")), "{lines:#?}");
    for line in &lines {
        assert!(!line.contains(forged_tenant) && !line.contains("admin=true"), "{line}");
        assert!(!line.contains("zzzzzzzz"), "{line}");
    }
    marker(&[a.addr, b.addr], (2, 1)).await;
}

/// Nothing more comes than `before` (created, completed) on each instance of `addrs`: a marker
/// created and completed last on the first is relayed after every earlier event (one relay
/// publishes in row order) and counted after it (each instance handles its events in order);
/// once each counts it, anything else would have been counted.
async fn marker(addrs: &[SocketAddr], before: (u64, u64)) {
    create_and_complete(addrs[0], "marker").await;
    let after = (before.0 + 1, before.1 + 1);
    for &addr in addrs {
        until("the marker to be counted", WITHIN, async || stats(addr).await == after).await;
    }
}

/// A commits, and is killed (SIGKILL) before its relay runs (it waits a minute after a
/// commit): B, started once A is dead, publishes what A left in the outbox in its first round,
/// counts it once, and A, restarted under the same name, receives what was published while it
/// was dead.
///
/// B starts after the kill, not before: a running B relays what it finds within its poll
/// (200 ms), and would publish A's first event while A, still alive, received and acknowledged
/// it; A's counts, in its memory, would die with it, and the restarted A never get that event
/// again (a failure CI once saw, under the load test running beside this one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_between_commit_and_relay_loses_no_event() {
    let Some(cluster) = Cluster::new("killed") else { return };
    let mut a = cluster.start("a", &[("TODOS_OUTBOX__LINGER_MS", "60000"), ("TODOS_OUTBOX__POLL_MS", "60000")]);
    ready(a.addr).await;
    create_and_complete(a.addr, "ada").await;
    a.signal("KILL");
    a.exited_within(Duration::from_secs(10));
    assert_eq!(cluster.count("di_outbox WHERE published_at IS NULL").await, 2, "A died before relaying its two events");
    let b = cluster.start("b", &[]);
    ready(b.addr).await;
    until("B to relay and count what A left", WITHIN, async || stats(b.addr).await == (1, 1)).await;
    until("the outbox to empty", WITHIN, async || cluster.count("di_outbox WHERE published_at IS NULL").await == 0)
        .await;
    let a = cluster.start("a", &[]);
    ready(a.addr).await;
    until("A, restarted, to receive what it missed", WITHIN, async || stats(a.addr).await == (1, 1)).await;
    marker(&[a.addr, b.addr], (1, 1)).await;
}

/// The purge job runs once per period across both instances: with a one-second period, the runs
/// each instance counts (its `/metrics`) add up to the due times claimed, one per second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_runs_once_per_period_across_both() {
    let Some(cluster) = Cluster::new("purge") else { return };
    let every = [("TODOS_PURGE__EVERY", "1s")];
    let (a, b) = (cluster.start("a", &every), cluster.start("b", &every));
    ready(a.addr).await;
    ready(b.addr).await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let runs = |text: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with("di_job_runs_total{job=\"todos::advice::TodoPurger::purge\"}"));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
    };
    // A run claimed just now may not be counted yet: read the claims after the counts.
    let (a_runs, b_runs) = (
        runs(&send(a.addr, "GET", "/metrics", &[], b"").await.body),
        runs(&send(b.addr, "GET", "/metrics", &[], b"").await.body),
    );
    let claimed = cluster.count("di_schedule_runs").await as u64;
    assert!(a_runs + b_runs >= 3, "four or five due times: {a_runs} + {b_runs}");
    assert!(
        claimed == a_runs + b_runs || claimed == a_runs + b_runs + 1,
        "each due time run by one instance: {a_runs} + {b_runs} runs, {claimed} claimed"
    );
}

/// How one client's requests went: the todo acknowledged (its id), whether its completion
/// was, and the answers other than success it got on the way.
#[derive(Default)]
struct Outcome {
    id: Option<i64>,
    completed: bool,
    busy: u64,
    failed: u64,
}

/// Sends `method path body` to `addr` until it is answered `ok`: a 503 (busy) is sent again
/// after its `Retry-After`, a 500 (a database gone mid-request: restarted) after 100 ms. The
/// reply.
async fn until_done(addr: SocketAddr, method: &str, path: &str, body: &str, ok: u16, outcome: &mut Outcome) -> String {
    // Refused again and again, a client backs off as a well-behaved one does: at least the
    // `Retry-After` the server gives, doubled with each refusal in a row (up to 16 times), and
    // jittered, so that ten thousand refused clients do not all come back in the same second.
    // Without it the refused clients' retries alone kept both instances' runtimes saturated,
    // and the pools' connections could not be served in time.
    let mut in_a_row = 0u32;
    loop {
        let reply = send_json(addr, method, path, body).await;
        let wait = match reply.status {
            status if status == ok => return reply.body,
            503 => {
                let after = reply.headers.get("retry-after").and_then(|s| s.parse().ok());
                let after = after.unwrap_or_else(|| panic!("a 503 says when to try again: {reply:?}"));
                outcome.busy += 1;
                Duration::from_secs(after)
            }
            500 => {
                outcome.failed += 1;
                Duration::from_millis(100)
            }
            _ => panic!("{method} {path}: {reply:?}"),
        };
        let backoff = wait * (1 << in_a_row.min(4));
        in_a_row += 1;
        tokio::time::sleep(backoff + backoff.mul_f64(jitter()) / 2).await;
    }
}

/// A number in `[0, 1)`, different at each call: the retries' jitter.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The data path under load and faults: ten thousand clients at once, alternating between the
/// instances, each creating a todo and marking it done, far more than either instance's
/// listen backlog (1024) or pool (8 connections) holds at a time; meanwhile NATS loses its
/// store once (restarted without it) and PostgreSQL is restarted once (open transactions cut).
/// A request refused as busy (503) or failed (500) is sent again, after a back-off that grows
/// while it is refused (`until_done`). In the end:
///
/// - acknowledged == stored: every todo answered 201 is stored, and done if its completion
///   was answered 200 (no 2xx for work not stored);
/// - every stored todo's creation, and every stored completion, is counted exactly once by
///   each instance, and nothing else: no event of rolled-back work (a request that failed) is
///   published, none is lost with NATS' store, none is handled twice;
/// - the outbox drains, and sets nothing aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_creates_and_completions_while_nats_loses_its_store_and_postgres_restarts() {
    const CLIENTS: usize = 10_000;
    // The sockets of all the clients at once, and those of the two instances (started after
    // this, they inherit the limit).
    tegu_test_support::open_files_at_least(CLIENTS as u64 + 1024);
    let Some(cluster) = Cluster::own("soak") else { return };
    let _alone = HEAVY.lock().await;
    let servers = cluster.own.as_ref().expect("servers of its own");
    let (a, b) = (cluster.start("a", &[]), cluster.start("b", &[]));
    ready(a.addr).await;
    ready(b.addr).await;
    let began = Instant::now();
    let acknowledged = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let addr = [a.addr, b.addr][i % 2];
            let acknowledged = acknowledged.clone();
            tokio::spawn(async move {
                let mut outcome = Outcome::default();
                let user = format!("u{}", i % 100);
                let body = format!(r#"{{"title":"soak {i}"}}"#);
                let created = until_done(addr, "POST", &format!("/users/{user}/todos"), &body, 201, &mut outcome).await;
                let id = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"].as_i64().unwrap();
                outcome.id = Some(id);
                acknowledged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let done = r#"{"done":true}"#;
                until_done(addr, "PATCH", &format!("/users/{user}/todos/{id}"), done, 200, &mut outcome).await;
                outcome.completed = true;
                outcome
            })
        })
        .collect();
    // The faults, while the clients run: NATS loses its store once a quarter of the creates
    // are acknowledged, PostgreSQL restarts at half.
    let faults = {
        let (nats, postgres, acknowledged) = (servers.nats.clone(), servers.postgres.clone(), acknowledged.clone());
        tokio::spawn(async move {
            let at = |n: usize| {
                let acknowledged = acknowledged.clone();
                async move {
                    while acknowledged.load(std::sync::atomic::Ordering::Relaxed) < n {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            };
            at(CLIENTS / 4).await;
            let lost = began.elapsed();
            tokio::task::spawn_blocking(move || {
                let mut nats = nats.lock().unwrap();
                nats.lose_store();
                nats.start().unwrap();
            })
            .await
            .unwrap();
            at(CLIENTS / 2).await;
            let restarted = began.elapsed();
            tokio::task::spawn_blocking(move || {
                let mut postgres = postgres.lock().unwrap();
                postgres.stop();
                postgres.start().unwrap();
            })
            .await
            .unwrap();
            (lost, restarted)
        })
    };
    let mut outcomes = Vec::with_capacity(CLIENTS);
    for client in clients {
        outcomes.push(client.await.unwrap());
    }
    let (lost, restarted) = faults.await.unwrap();
    let answered = began.elapsed();
    let (busy, failed): (u64, u64) = (outcomes.iter().map(|o| o.busy).sum(), outcomes.iter().map(|o| o.failed).sum());
    // Acknowledged == stored.
    let pool = sqlx::PgPool::connect(&cluster.db).await.unwrap();
    let stored: Vec<(i64, bool)> = sqlx::query_as("SELECT id, done FROM todos").fetch_all(&pool).await.unwrap();
    let stored: std::collections::HashMap<i64, bool> = stored.into_iter().collect();
    for outcome in &outcomes {
        let id = outcome.id.expect("every client's create was acknowledged");
        assert_eq!(
            stored.get(&id),
            Some(&true),
            "todo {id} was acknowledged created and done: stored as {:?}",
            stored.get(&id)
        );
    }
    let done = stored.values().filter(|&&done| done).count() as u64;
    let created = stored.len() as u64;
    // Each stored creation and completion counted once by each instance, nothing else.
    until("the outbox to drain", WITHIN, async || cluster.count("di_outbox WHERE published_at IS NULL").await == 0)
        .await;
    for addr in [a.addr, b.addr] {
        until("each instance to count every stored create and completion", WITHIN, async || {
            stats(addr).await == (created, done)
        })
        .await;
    }
    let counted = began.elapsed();
    marker(&[a.addr, b.addr], (created, done)).await;
    assert_eq!(cluster.count("di_outbox_dead_letters").await, 0);
    eprintln!(
        "soak: {CLIENTS} clients, each a create and a completion, across two instances\n\
         NATS lost its store at {lost:?}, PostgreSQL restarted at {restarted:?}\n\
         all answered 2xx at {answered:?}: {busy} attempts answered 503 (busy) and {failed} answered 500 (a database gone mid-request), each sent again\n\
         stored: {created} todos ({} more than acknowledged: creates stored whose answer was a 500), {done} done\n\
         counted once by each instance (created, completed) = ({created}, {done}) at {counted:?}; the outbox drained, nothing set aside",
        created - CLIENTS as u64
    );
}

/// Ten thousand todos completed on A, while B shares the notifier's subscription with it and is
/// killed (SIGKILL) mid-handling, then restarted under its name: each completion is notified
/// exactly once in the whole cluster (rows counted in the database: the table has no unique
/// key, the inbox alone keeps a second row out), what B held when it died is taken over by A
/// once NATS' `ack_wait` passes, and A, alive throughout, counts every creation and completion
/// once (the handler each instance runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_completions_are_notified_once_while_an_instance_is_killed_mid_handling() {
    const TODOS: usize = 10_000;
    let Some(cluster) = Cluster::new("notified") else { return };
    let _alone = HEAVY.lock().await;
    let quick = [("TODOS_NATS__ACK_WAIT_MS", "2000")];
    let (a, mut b) = (cluster.start("a", &quick), cluster.start("b", &quick));
    ready(a.addr).await;
    ready(b.addr).await;
    // A hundred users, a hundred todos each, in one batch per user.
    let titles = format!("[{}]", vec![r#"{"title":"n"}"#; 100].join(","));
    let mut by_user = Vec::with_capacity(TODOS / 100);
    for user in 0..TODOS / 100 {
        let reply = send_json(a.addr, "POST", &format!("/users/n{user}/todos/batch"), &titles).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        let created: Vec<serde_json::Value> = serde_json::from_str(&reply.body).unwrap();
        by_user.push(created.iter().map(|todo| (user, todo["id"].as_i64().unwrap())).collect::<Vec<_>>());
    }
    // The users interleaved (a user's completions are one key, notified one after the other).
    let todos: Vec<(usize, i64)> = (0..100).flat_map(|i| by_user.iter().map(move |todos| todos[i])).collect();
    // Completed by 32 clients at once, all on A.
    let todos = std::sync::Arc::new(std::sync::Mutex::new(todos));
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let (todos, addr) = (todos.clone(), a.addr);
            tokio::spawn(async move {
                loop {
                    let Some((user, id)) = todos.lock().unwrap().pop() else { return };
                    let path = format!("/users/n{user}/todos/{id}");
                    until_done(addr, "PATCH", &path, r#"{"done":true}"#, 200, &mut Outcome::default()).await;
                }
            })
        })
        .collect();
    let notified = async || cluster.count("notifications").await;
    until("a quarter notified", Duration::from_secs(300), async || notified().await >= (TODOS / 4) as i64).await;
    b.signal("KILL");
    b.exited_within(Duration::from_secs(10));
    let killed_at = notified().await;
    let b = cluster.start("b", &quick);
    ready(b.addr).await;
    for client in clients {
        client.await.unwrap();
    }
    until("every completion notified", Duration::from_secs(300), async || notified().await >= TODOS as i64).await;
    // Past two `ack_wait`s: nothing comes twice.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pool = sqlx::PgPool::connect(&cluster.db).await.unwrap();
    let (rows, todos, keys): (i64, i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT todo), count(DISTINCT key) FROM notifications")
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    assert_eq!((rows, todos, keys), (TODOS as i64, TODOS as i64, TODOS as i64), "each completion notified once");
    until("A to count every creation and completion once", WITHIN, async || {
        stats(a.addr).await == (TODOS as u64, TODOS as u64)
    })
    .await;
    assert_eq!(cluster.count("di_outbox_dead_letters").await, 0);
    eprintln!(
        "notified: {TODOS} completions on A, B killed at {killed_at} notifications and restarted; each notified once"
    );
    drop(b);
}
