//! A request's lineage follows its work: the tasks it spawns, its events' handlers in every
//! phase, the jobs it starts; their log lines carry its fields; headers read back refuse what
//! is no value.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Mutex;

use tegu_core::error::BoxError;
use tegu_core::lineage::{Lineage, LinkedWork, Tenant, TraceContext, TraceLink, Travels};
use tegu_core::{App, ContextRef, DiError, handlers, singleton_proto};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

pub struct Completed;

/// Who made the request: a lineage type of the service's own.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller(String);

impl Travels for Caller {
    const HEADER: &'static str = "x-caller";

    fn encode(&self) -> String {
        self.0.clone()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(Caller(value.to_owned()))
    }
}

tegu_core::lineage_type!(Caller);

#[singleton_proto]
pub struct Seen {
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    caller: ContextRef<Caller>,
    lines: Mutex<Vec<String>>,
}

impl Seen {
    fn note(&self, what: &str) {
        let tenant = match self.tenant.try_get() {
            Ok(tenant) => tenant.key().to_owned(),
            Err(DiError::NoTenant { .. }) => "no tenant".to_owned(),
            Err(e) => format!("{e}"),
        };
        let caller = match self.caller.try_get() {
            Ok(caller) => caller.0.clone(),
            Err(DiError::NoLineage { .. }) => "no caller".to_owned(),
            Err(e) => format!("{e}"),
        };
        self.lines.lock().unwrap().push(format!("{what}: {tenant} {caller}"));
    }

    fn lines(&self) -> Vec<String> {
        let mut lines = self.lines.lock().unwrap().clone();
        lines.sort();
        lines
    }
}

#[handlers]
impl Seen {
    #[event_handler(before_commit)]
    async fn before(&self, _: &Completed) {
        self.note("before_commit");
    }

    #[event_handler]
    async fn after(&self, _: &Completed) {
        self.note("after_commit");
        tracing::info!("handled");
    }

    #[event_handler(after_rollback)]
    async fn rolled_back(&self, _: &Completed) {
        self.note("after_rollback");
    }

    #[schedule(every = "1h")]
    async fn job(&self) -> Result<(), DiError> {
        self.note("job");
        Ok(())
    }
}

async fn app() -> App {
    App::builder().lineage::<Tenant>().lineage::<Caller>().without_schedules().build().await.unwrap()
}

#[tokio::test]
async fn a_requests_tasks_handlers_in_every_phase_and_jobs_see_its_lineage() {
    let app = app().await;
    let seen = app.get_object::<Seen>().unwrap();
    let lineage = Lineage::new().with(Tenant::new("acme").unwrap()).with(Caller("ada".into()));
    let in_task = app
        .scope()
        .lineage(&lineage)
        .try_run(async {
            app.events().emit(Completed);
            app.run_schedule::<Seen>("job").await?;
            let task = tegu_core::spawn(async { Lineage::current().get::<Tenant>().map(|t| t.key().to_owned()) });
            Ok::<_, DiError>(task.await.unwrap())
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(in_task.as_deref(), Some("acme"));
    // A failed request: its after_rollback handlers get its lineage too.
    app.scope()
        .tenant("globex")
        .unwrap()
        .run(async {
            app.events().emit(Completed);
            tegu_core::scope::fail_scope();
        })
        .await;
    app.shutdown().await.unwrap();
    assert_eq!(
        seen.lines(),
        ["after_commit: acme ada", "after_rollback: globex no caller", "before_commit: acme ada", "job: acme ada"]
    );
}

#[tokio::test]
async fn work_outside_a_request_inherits_nothing() {
    let app = app().await;
    let seen = app.get_object::<Seen>().unwrap();
    app.events().emit(Completed); // outside any scope: no lineage
    app.run_schedule::<Seen>("job").await.unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(
        seen.lines(),
        ["after_commit: no tenant no caller", "before_commit: no tenant no caller", "job: no tenant no caller"]
    );
}

#[test]
fn a_handlers_log_lines_carry_the_lineage_as_fields() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = App::builder()
                .lineage::<Tenant>()
                .lineage::<TraceContext>()
                .lineage::<Caller>()
                .without_schedules()
                .build()
                .await
                .unwrap();
            let lineage =
                Lineage::new().with(Tenant::new("acme").unwrap()).with(TraceContext::parse(TRACEPARENT).unwrap());
            app.scope().lineage(&lineage).run(async { app.events().emit(Completed) }).await;
            app.shutdown().await.unwrap();
        });
    });
    let line = logs.lines().find(|l| l.contains("handled")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains("trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\""), "{line}");
    assert!(line.contains("tenant=\"acme\""), "{line}");
    assert!(line.contains("event handler{event=\"lineage::Completed\""), "{line}");
}

#[test]
fn forged_headers_are_refused_and_never_written_to_a_log_line() {
    let forged = "acme\n2026-12-06T00:00:00Z  INFO forged: admin=true";
    let (lineage, logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app =
                App::builder().without_inventory().lineage::<Tenant>().lineage::<TraceContext>().build().await.unwrap();
            let mut lineage = app.lineage_from_headers([("tegu-tenant", forged), ("traceparent", forged)]);
            for (name, value) in app.lineage_from_headers([("tegu-tenant", "acme user=x")]).headers() {
                lineage = lineage.with(Tenant::new(value).unwrap_or_else(|_| panic!("{name}")));
            }
            lineage
        })
    });
    assert!(lineage.is_empty(), "{lineage:?}");
    assert_eq!(logs.matches("a lineage header was refused").count(), 3, "{logs}");
    assert!(!logs.contains("INFO forged"), "a header value made a line of its own: {logs}");
    assert!(!logs.contains("user=x"), "a header value was written as a field: {logs}");
}

/// Records the lineage of each span it links: what tegu-otel's link gets.
#[singleton_proto(provides(dyn TraceLink))]
#[derive(Default)]
pub struct Links {
    seen: Mutex<Vec<String>>,
}

impl TraceLink for Links {
    fn link(&self, _: &tracing::Span, lineage: &Lineage, work: LinkedWork) {
        self.seen.lock().unwrap().push(format!("{work:?} {lineage:?}"));
    }
}

#[tokio::test]
async fn the_trace_link_gets_each_handlers_lineage() {
    let app = App::builder()
        .lineage::<Tenant>()
        .lineage::<TraceContext>()
        .lineage::<Caller>()
        .without_schedules()
        .build()
        .await
        .unwrap();
    let trace = TraceContext::parse(TRACEPARENT).unwrap();
    app.scope().lineage(&Lineage::new().with(trace)).run(async { app.events().emit(Completed) }).await;
    app.shutdown().await.unwrap();
    let seen = app.get_object::<Links>().unwrap().seen.lock().unwrap().clone();
    // The before_commit and after_commit handlers' spans: the trace their request had.
    assert_eq!(seen, vec![format!("Event {{\"traceparent\": \"{TRACEPARENT}\"}}"); 2]);
    // One delivered by a transport, read from a message's headers.
    let delivered = app.lineage_from_headers([("traceparent", TRACEPARENT)]);
    let app2 = App::builder().lineage::<TraceContext>().without_schedules().build().await.unwrap();
    app2.events().deliver_with(Completed, &delivered).await;
    app2.shutdown().await.unwrap();
    let seen = app2.get_object::<Links>().unwrap().seen.lock().unwrap().clone();
    assert_eq!(seen, [format!("Delivered {{\"traceparent\": \"{TRACEPARENT}\"}}")]);
}

/// Claims the tenant's header, in capitals, and a field the spans do not have.
pub struct Impostor;

impl Travels for Impostor {
    const HEADER: &'static str = "Tegu-Tenant";
    const LOG_FIELD: Option<&'static str> = Some("user");

    fn encode(&self) -> String {
        "x".into()
    }

    fn decode(_: &str) -> Result<Self, BoxError> {
        Ok(Impostor)
    }
}

/// Panics on whatever it is given.
pub struct Fragile;

impl Travels for Fragile {
    const HEADER: &'static str = "x-fragile";

    fn encode(&self) -> String {
        panic!("encode breaks")
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        let _ = &value[..100]; // slices past the end of a short value
        Ok(Fragile)
    }
}

#[tokio::test]
async fn a_lineage_type_that_cannot_travel_is_refused_naming_it() {
    let error = App::builder().without_inventory().lineage::<Tenant>().lineage::<Impostor>().check().unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("lineage type `lineage::Impostor` cannot travel: its header \"Tegu-Tenant\" is not lowercase"),
        "{text}"
    );
    assert!(text.contains("its log field \"user\" is none of the spans' fields"), "{text}");
    assert!(
        text.contains(
            "`tegu_core::lineage::Tenant` cannot travel: its header \"tegu-tenant\" is also `lineage::Impostor`'s"
        ),
        "{text}"
    );
}

#[test]
fn a_panicking_lineage_type_and_a_header_given_twice_are_left_out() {
    let (lineage, logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app =
                App::builder().without_inventory().lineage::<Tenant>().lineage::<Fragile>().build().await.unwrap();
            let read = app.lineage_from_headers([("x-fragile", "short"), ("tegu-tenant", "a"), ("TEGU-TENANT", "b")]);
            // Written as headers, a value whose `encode` panics is left out.
            let written: Vec<_> = Lineage::new().with(Fragile).with(Tenant::new("c").unwrap()).headers().collect();
            assert_eq!(written, [("tegu-tenant", "c".to_owned())]);
            read
        })
    });
    assert!(lineage.is_empty(), "{lineage:?}");
    assert!(logs.contains("a lineage type's method panicked") && logs.contains("method=\"decode\""), "{logs}");
    assert!(logs.contains("a lineage header was given more than once"), "{logs}");
}

#[test]
fn reserved_trace_flags_are_sent_as_zero() {
    // W3C Trace Context Level 1 defines the flag `sampled` (0x01) alone; the others are sent as 0.
    let received = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff";
    let trace = TraceContext::parse(received).unwrap();
    assert_eq!(trace.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    assert_eq!((trace.flags(), trace.sampled()), (0x01, true));
    let unsampled = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe").unwrap();
    assert_eq!(unsampled.encode(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    assert_eq!(TraceContext::new([0x4b; 16], [0x01; 8], 0x03).unwrap().flags(), 0x01);
    assert_eq!(trace.with_flags(0x82).flags(), 0x00);
    // What travels to another instance, through a lineage's headers.
    let headers: Vec<_> = Lineage::new().with(trace).headers().collect();
    assert_eq!(headers, [("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned())]);
}

#[test]
fn a_blocking_task_logs_in_the_span_it_was_spawned_in_as_a_task_does() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = App::builder().without_inventory().build().await.unwrap();
            let span = tracing::info_span!("request", tenant = "acme", trace_id = "4bf92f3577b34da6a3ce929d0e0e4736");
            let work = async {
                tegu_core::scope::spawn_blocking(|| tracing::info!("blocking work done")).await.unwrap();
                tegu_core::spawn(async { tracing::info!("async work done") }).await.unwrap();
            };
            app.run_in_context(tracing::Instrument::instrument(work, span)).await;
        });
    });
    for what in ["blocking work done", "async work done"] {
        let line = logs.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no `{what}` in {logs}"));
        assert!(line.contains("request{tenant=\"acme\" trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"}"), "{line}");
    }
}

#[test]
fn a_tracestate_over_512_characters_is_trimmed_as_the_recommendation_says() {
    use tegu_core::lineage::TraceState;
    // 20 entries of 24 characters (`k00=` and 20 digits), and one of 140 in the middle.
    let small: Vec<String> = (0..20).map(|i| format!("k{i:02}={}", "7".repeat(20))).collect();
    let big = format!("big={}", "x".repeat(136));
    let mut entries = small.clone();
    entries.insert(5, big);
    let value = entries.join(", ");
    assert!(value.len() > 512);
    // The entry over 128 characters goes first: 20 × 24 + 19 commas = 499, which fits.
    let state = TraceState::decode(&value).unwrap();
    assert_eq!(state.as_str(), small.join(","));
    // Then entries from the end, until it fits.
    let many: Vec<String> = (0..30).map(|i| format!("k{i:02}={}", "7".repeat(20))).collect();
    let state = TraceState::new(&many.join(",")).unwrap();
    assert_eq!(state.as_str(), many[..20].join(","));
    // A value that fits is kept as it came; a line break is still refused.
    assert_eq!(TraceState::new("a=1, b=2").unwrap().as_str(), "a=1, b=2");
    assert!(TraceState::new(&format!("{}\nforged=1", many.join(","))).is_err());
}

/// A worker's own request id, for an App without tegu-http: the same header and log field as
/// `tegu_http::RequestId`, so that an event's request id goes on through it.
#[derive(Debug)]
pub struct WorkerRequestId(String);

impl Travels for WorkerRequestId {
    const HEADER: &'static str = "x-request-id";
    const LOG_FIELD: Option<&'static str> = Some("request_id");

    fn encode(&self) -> String {
        self.0.clone()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        let ok = (1..=128).contains(&value.len())
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if ok { Ok(WorkerRequestId(value.to_owned())) } else { Err("a request id".into()) }
    }
}

#[tokio::test]
async fn an_app_without_a_request_id_type_leaves_the_header_out_and_one_with_its_own_carries_it() {
    let headers = [("x-request-id", "req-7"), ("tegu-tenant", "acme")];
    // The request id is tegu-http's lineage type: an App without it does not know the header.
    let app = App::builder().without_inventory().lineage::<Tenant>().build().await.unwrap();
    let lineage = app.lineage_from_headers(headers);
    assert_eq!(lineage.headers().collect::<Vec<_>>(), [("tegu-tenant", "acme".to_owned())]);
    // With a type of its own for the header, it reads it and writes it on.
    let app =
        App::builder().without_inventory().lineage::<Tenant>().lineage::<WorkerRequestId>().build().await.unwrap();
    let lineage = app.lineage_from_headers(headers);
    assert_eq!(lineage.get::<WorkerRequestId>().map(|r| r.0.as_str()), Some("req-7"));
    let emitted = app.scope().lineage(&lineage).run(async { Lineage::current() }).await;
    assert!(emitted.headers().any(|(h, v)| h == "x-request-id" && v == "req-7"), "{emitted:?}");
}
