//! Tenants from the request: read once by the router, refused with a 400 that names where they
//! were looked for, never mixed up under load, and carried into the work a request causes; a
//! lineage an outer layer put in the request's extensions seeds its scope.

#![allow(missing_docs, missing_debug_implementations)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::Request;
use tegu_core::error::BoxError;
use tegu_core::lineage::{Lineage, Tenant, TraceContext};
use tegu_core::tenant::{TenantObjects, TenantRef};
use tegu_core::{App, ContextRef, Provider, events::EventBus, handlers, singleton_proto, transient_proto};
use tegu_http::{RouterBuilder, TenantFrom, http_controller, http_routes};
use tower::ServiceExt;

const TENANTS: u64 = 10_000;
const CONCURRENT: usize = 1_000;
const PER_TASK: usize = 30;

/// A singleton every tenant's inbox shares.
#[singleton_proto]
#[derive(Default)]
pub struct Store {
    opened: AtomicU64,
}

/// A tenant's inbox: a proto built once per tenant, with its dependencies injected.
#[transient_proto]
pub struct Inbox {
    #[inject]
    store: Arc<Store>,
    tenant: Mutex<String>,
}

/// Builds each tenant's `Inbox` through its provider, and counts builds and destroys.
#[singleton_proto]
pub struct Inboxes {
    #[inject]
    inboxes: Provider<Inbox>,
    built: Mutex<HashMap<String, usize>>,
    destroyed: Mutex<HashMap<String, usize>>,
}

impl TenantObjects for Inboxes {
    type Object = Arc<Inbox>;
    const MAX_TENANTS: usize = TENANTS as usize;

    async fn create(&self, tenant: &Tenant) -> Result<Arc<Inbox>, BoxError> {
        let inbox = self.inboxes.get()?;
        inbox.store.opened.fetch_add(1, Ordering::Relaxed);
        *inbox.tenant.lock().unwrap() = tenant.key().to_owned();
        *self.built.lock().unwrap().entry(tenant.key().to_owned()).or_default() += 1;
        tokio::task::yield_now().await; // first reads of one tenant overlap here
        Ok(inbox)
    }

    async fn destroy(&self, tenant: &Tenant, inbox: Arc<Arc<Inbox>>) -> Result<(), BoxError> {
        assert_eq!(*inbox.tenant.lock().unwrap(), tenant.key());
        *self.destroyed.lock().unwrap().entry(tenant.key().to_owned()).or_default() += 1;
        Ok(())
    }
}

pub struct Noted;

#[singleton_proto]
pub struct Notes {
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    trace: ContextRef<TraceContext>,
    handled: Mutex<Vec<String>>,
}

#[handlers]
impl Notes {
    #[event_handler]
    async fn on_noted(&self, _: &Noted) -> Result<(), tegu_core::DiError> {
        let tenant = self.tenant.try_get()?.key().to_owned();
        let trace = self.trace.try_get().map(|t| t.trace_id_hex()).unwrap_or_default();
        self.handled.lock().unwrap().push(format!("{tenant} {trace}"));
        Ok(())
    }
}

#[http_controller]
pub struct TenantController {
    #[inject]
    inboxes: TenantRef<Inboxes>,
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    events: Arc<EventBus>,
}

#[http_routes]
impl TenantController {
    /// The request's tenant, and whose inbox it reached: the two must agree.
    #[get("/tenant")]
    async fn whose(&self) -> String {
        let tenant = self.tenant.try_get().map(|t| t.key().to_owned()).unwrap_or_else(|e| format!("error: {e}"));
        let inbox = match self.inboxes.get().await {
            Ok(inbox) => inbox.tenant.lock().unwrap().clone(),
            Err(e) => format!("error: {e}"),
        };
        format!("{tenant} {inbox}")
    }

    #[post("/tenant/note")]
    async fn note(&self) {
        self.events.emit(Noted);
    }
}

async fn send(router: &Router, request: axum::http::request::Builder) -> (u16, String) {
    let response = router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = to_bytes(response.into_body(), 1 << 16).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_tenants_under_a_thousand_concurrent_requests_never_mix() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap();
    let wrong = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..CONCURRENT {
        let (router, wrong) = (router.clone(), wrong.clone());
        tasks.spawn(async move {
            let mut state = task as u64 * 2_654_435_761 + 1;
            for i in 0..PER_TASK {
                // Every tenant at least once, then a cheap mix.
                let n = if i < 10 { (task * 10 + i) as u64 % TENANTS } else { state % TENANTS };
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let key = format!("t{n}");
                let (status, body) = send(&router, Request::get("/tenant").header("x-tenant", &key)).await;
                if status != 200 || body != format!("{key} {key}") {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    tasks.join_all().await;
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "a request saw another tenant's object");
    let inboxes = app.get_object::<Inboxes>().unwrap();
    let built = inboxes.built.lock().unwrap().clone();
    assert_eq!(built.len(), TENANTS as usize);
    assert!(built.values().all(|&n| n == 1), "an inbox was built twice while cached");
    assert_eq!(app.get_object::<Store>().unwrap().opened.load(Ordering::Relaxed), TENANTS);
    app.shutdown().await.unwrap();
    let destroyed = inboxes.destroyed.lock().unwrap().clone();
    assert_eq!(destroyed.len(), TENANTS as usize, "every inbox is destroyed at shutdown");
    assert!(destroyed.values().all(|&n| n == 1));
}

#[tokio::test]
async fn a_request_whose_tenant_cannot_be_read_is_answered_400_naming_where_it_was_looked_for() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap();
    let (status, body) = send(&router, Request::get("/tenant")).await;
    assert_eq!((status, body.as_str()), (400, "the request names no tenant: header `x-tenant` is missing"));
    let (status, body) = send(&router, Request::get("/tenant").header("x-tenant", "acme\"} admin=true")).await;
    assert_eq!(status, 400);
    assert!(
        body.starts_with("the tenant in header `x-tenant` is refused: a tenant key is refused: its byte 4 is"),
        "{body}"
    );
    assert!(!body.contains("admin=true"), "the answer repeats what the client sent: {body}");

    // Named twice: which would it be? Refused.
    let (status, body) =
        send(&router, Request::get("/tenant").header("x-tenant", "acme").header("x-tenant", "globex")).await;
    assert_eq!((status, body.as_str()), (400, "the request names its tenant twice: header `x-tenant` is given twice"));

    // Optional: a request without one is served with none, and its `TenantRef` says so.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant").optional()).build().unwrap();
    let (status, body) = send(&router, Request::get("/tenant")).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("error: `Tenant`") || body.starts_with("error: "), "{body}");

    // From the host.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::host(".todos.example")).build().unwrap();
    let (status, body) = send(&router, Request::get("/tenant").header("host", "acme.todos.example:8080")).await;
    assert_eq!((status, body.as_str()), (200, "acme acme"));
    // Host names have no case: one tenant, not two.
    let (status, body) = send(&router, Request::get("/tenant").header("host", "ACME.Todos.Example")).await;
    assert_eq!((status, body.as_str()), (200, "acme acme"));
    let (status, _) = send(
        &router,
        Request::get("/tenant").header("host", "acme.todos.example").header("host", "evil.todos.example"),
    )
    .await;
    assert_eq!(status, 400);
    // An absolute-form target names the host (RFC 9112), and a `Host` header naming another
    // one is refused: behind a gateway that sets `Host` alone, the client would choose.
    let target = || Request::get("http://globex.todos.example/tenant");
    let (status, body) = send(&router, target().header("host", "acme.todos.example")).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "the request names two hosts: its target's authority and its `Host` header differ")
    );
    let (status, body) = send(&router, target().header("host", "GLOBEX.todos.example:80")).await;
    assert_eq!((status, body.as_str()), (200, "globex globex"));
    let (status, body) = send(&router, target()).await;
    assert_eq!((status, body.as_str()), (200, "globex globex"));

    // A header that names another tenant than the one a layer's lineage gave is refused: the
    // client does not replace what its authentication said.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap().layer(
        axum::middleware::map_request(|mut request: Request<Body>| async move {
            request.extensions_mut().insert(Lineage::new().with(Tenant::new("authenticated").unwrap()));
            request
        }),
    );
    let (status, body) = send(&router, Request::get("/tenant").header("x-tenant", "other")).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "the request names two tenants: header `x-tenant` and the one a layer gave it differ")
    );
    let (status, body) = send(&router, Request::get("/tenant").header("x-tenant", "authenticated")).await;
    assert_eq!((status, body.as_str()), (200, "authenticated authenticated"));

    // From the service's own layer.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::extension()).build().unwrap().layer(
        axum::middleware::map_request(|mut request: Request<Body>| async move {
            request.extensions_mut().insert(Tenant::new("claimed").unwrap());
            request
        }),
    );
    let (status, body) = send(&router, Request::get("/tenant")).await;
    assert_eq!((status, body.as_str()), (200, "claimed claimed"));
    // Or in the `Lineage` the layer seeds the scope with.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::extension()).build().unwrap().layer(
        axum::middleware::map_request(|mut request: Request<Body>| async move {
            request.extensions_mut().insert(Lineage::new().with(Tenant::new("seeded").unwrap()));
            request
        }),
    );
    let (status, body) = send(&router, Request::get("/tenant")).await;
    assert_eq!((status, body.as_str()), (200, "seeded seeded"));
}

/// A request on a router that reads no tenant: reading the tenant fails naming the router's
/// rule, and the rule it names serves the tenant.
#[tokio::test]
async fn a_tenant_read_where_the_router_reads_none_names_the_routers_rule_which_serves_it() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).build().unwrap();
    let (status, body) = send(&router, Request::get("/tenant").header("x-tenant", "acme")).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("error: "), "{body}");
    assert!(
        body.contains("`RouterBuilder::tenant(TenantFrom::header(\"x-tenant\"))`"),
        "the remedy on tegu-http: {body}"
    );
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap();
    assert_eq!(send(&router, Request::get("/tenant").header("x-tenant", "acme")).await, (200, "acme acme".to_owned()));
}

#[tokio::test]
async fn a_routers_tenant_needs_an_app_with_tenants() {
    let app = App::builder().without_inventory().build().await.unwrap();
    let refused = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap_err();
    assert!(refused.to_string().contains("`.lineage::<Tenant>()`"), "{refused}");
}

#[tokio::test]
async fn the_requests_tenant_and_an_outer_layers_trace_reach_its_events_handlers() {
    let app = App::builder().build().await.unwrap();
    let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap().layer(
        axum::middleware::map_request(move |mut request: Request<Body>| async move {
            request.extensions_mut().insert(Lineage::new().with(trace));
            request
        }),
    );
    let (status, _) = send(&router, Request::post("/tenant/note").header("x-tenant", "acme")).await;
    assert_eq!(status, 200);
    app.shutdown().await.unwrap();
    let handled = app.get_object::<Notes>().unwrap().handled.lock().unwrap().clone();
    assert_eq!(handled, ["acme 4bf92f3577b34da6a3ce929d0e0e4736"]);
}

/// As `Inboxes`, with room for ten tenants.
#[singleton_proto]
pub struct FewInboxes {
    #[inject]
    inboxes: Provider<Inbox>,
    destroyed: Mutex<Vec<String>>,
}

impl TenantObjects for FewInboxes {
    type Object = Arc<Inbox>;
    const MAX_TENANTS: usize = 10;

    async fn create(&self, tenant: &Tenant) -> Result<Arc<Inbox>, BoxError> {
        let inbox = self.inboxes.get()?;
        *inbox.tenant.lock().unwrap() = tenant.key().to_owned();
        Ok(inbox)
    }

    async fn destroy(&self, tenant: &Tenant, inbox: Arc<Arc<Inbox>>) -> Result<(), BoxError> {
        assert_eq!(*inbox.tenant.lock().unwrap(), tenant.key());
        self.destroyed.lock().unwrap().push(tenant.key().to_owned());
        Ok(())
    }
}

#[singleton_proto]
pub struct FewReader {
    #[inject]
    inboxes: TenantRef<FewInboxes>,
}

#[tokio::test]
async fn a_tenants_proto_is_destroyed_when_it_is_evicted() {
    let app = App::builder().build().await.unwrap();
    let reader = app.get_object::<FewReader>().unwrap();
    for n in 0..50 {
        let key = format!("t{n}");
        let seen = app
            .scope()
            .tenant(key.as_str())
            .unwrap()
            .run(async { reader.inboxes.get().await.map(|i| i.tenant.lock().unwrap().clone()) });
        assert_eq!(seen.await.unwrap(), key);
    }
    let inboxes = app.get_object::<FewInboxes>().unwrap();
    let evicted = tegu_test_support::eventually(async || {
        let destroyed = inboxes.destroyed.lock().unwrap().clone();
        (destroyed.len() >= 40).then_some(destroyed)
    })
    .await;
    assert!(
        evicted.iter().all(|k| k[1..].parse::<u32>().unwrap() < 40),
        "evicted one of the ten last read: {evicted:?}"
    );
    app.shutdown().await.unwrap();
    let mut destroyed = inboxes.destroyed.lock().unwrap().clone();
    assert_eq!(destroyed.len(), 50);
    destroyed.sort();
    destroyed.dedup();
    assert_eq!(destroyed.len(), 50, "each built inbox destroyed once");
}

#[tokio::test]
async fn a_host_that_is_no_host_name_is_refused_and_an_empty_port_is_not() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).tenant(TenantFrom::host(".todos.example")).build().unwrap();
    let refused = |why: &str| format!("the tenant in the host name before `.todos.example` is refused: {why}");
    for (host, why) in [
        ("..todos.example", "the host is no host name: a label is empty"),
        ("...todos.example", "the host is no host name: a label is empty"),
        ("acme..todos.example", "the host is no host name: a label is empty"),
        (".acme.todos.example", "the host is no host name: a label is empty"),
        ("-acme.todos.example", "the host is no host name: a label starts or ends with `-`"),
        ("acme-.todos.example", "the host is no host name: a label starts or ends with `-`"),
        (
            "ac_me.todos.example",
            "the host is no host name: a label has a character other than ASCII letters, digits and `-`",
        ),
    ] {
        let (status, body) = send(&router, Request::get("/tenant").header("host", host)).await;
        assert_eq!((status, body.as_str()), (400, refused(why).as_str()), "{host}");
    }
    let long = format!("{}.todos.example", "a".repeat(64));
    let (status, body) = send(&router, Request::get("/tenant").header("host", long.as_str())).await;
    assert_eq!((status, body), (400, refused("the host is no host name: a label is longer than 63 characters")));
    let long = format!("{}.todos.example", vec!["a".repeat(63); 4].join("."));
    let (status, body) = send(&router, Request::get("/tenant").header("host", long.as_str())).await;
    assert_eq!((status, body), (400, refused("the host is no host name: it is longer than 253 characters")));

    // An empty port is no port (RFC 3986: `port = *DIGIT`).
    let (status, body) = send(&router, Request::get("/tenant").header("host", "acme.todos.example:")).await;
    assert_eq!((status, body.as_str()), (200, "acme acme"));
    let (status, body) = send(&router, Request::get("http://acme.todos.example:/tenant")).await;
    assert_eq!((status, body.as_str()), (200, "acme acme"));
    // A tenant of several labels, each a label, is one.
    let (status, body) = send(&router, Request::get("/tenant").header("host", "eu.acme.todos.example")).await;
    assert_eq!((status, body.as_str()), (200, "eu.acme eu.acme"));
}

#[tokio::test]
async fn a_host_suffix_without_its_leading_dot_is_refused_when_the_router_is_built() {
    let app = App::builder().build().await.unwrap();
    let refused = RouterBuilder::new(&app).tenant(TenantFrom::host("todos.example")).build().unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the tenant rule `TenantFrom::host(\"todos.example\")` is refused: a host suffix starts with `.` \
         (`.todos.example`): without it, the host `eviltodos.example` would serve the tenant `evil`"
    );
    assert!(format!("{refused:?}").starts_with("TenantRule"), "{refused:?}");
    let layer = tegu_http::ContextLayer::new(app.clone()).tenant(TenantFrom::host("todos.example"));
    assert!(layer.is_err_and(|e| e.to_string() == refused.to_string()));
    for (suffix, why) in [
        (".", "the host suffix is no host name after its `.`: a label is empty"),
        (".todos..example", "the host suffix is no host name after its `.`: a label is empty"),
        (".todos.example.", "the host suffix is no host name after its `.`: a label is empty"),
        (
            ".todos_example",
            "the host suffix is no host name after its `.`: a label has a character other than ASCII letters, digits and `-`",
        ),
    ] {
        let refused = RouterBuilder::new(&app).tenant(TenantFrom::host(suffix)).build().unwrap_err();
        assert_eq!(refused.to_string(), format!("the tenant rule `TenantFrom::host({suffix:?})` is refused: {why}"));
    }
}

#[tokio::test]
async fn a_request_without_the_header_is_served_as_the_tenant_an_outer_layer_gave() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build().unwrap().layer(
        axum::middleware::map_request(|mut request: Request<Body>| async move {
            request.extensions_mut().insert(Lineage::new().with(Tenant::new("authenticated").unwrap()));
            request
        }),
    );
    let (status, body) = send(&router, Request::get("/tenant")).await;
    assert_eq!((status, body.as_str()), (200, "authenticated authenticated"));
    // The same from the host.
    let router = RouterBuilder::new(&app).tenant(TenantFrom::host(".todos.example")).build().unwrap().layer(
        axum::middleware::map_request(|mut request: Request<Body>| async move {
            request.extensions_mut().insert(Lineage::new().with(Tenant::new("authenticated").unwrap()));
            request
        }),
    );
    let (status, body) = send(&router, Request::get("/tenant").header("host", "todos.example")).await;
    assert_eq!((status, body.as_str()), (200, "authenticated authenticated"));
    // One naming another tenant is still refused.
    let (status, _) = send(&router, Request::get("/tenant").header("host", "other.todos.example")).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_scope_a_request_opens_for_another_tenant_keeps_the_requests_id() {
    use axum::routing::get;
    let app = App::builder().build().await.unwrap();
    let nested = {
        let app = app.clone();
        move || async move {
            let lineage = app.scope().tenant("globex").unwrap().run(async { Lineage::current() }).await;
            let tenant = lineage.get::<Tenant>().map(|t| t.key().to_owned()).unwrap_or_default();
            let id = lineage.get::<tegu_http::RequestId>().map(ToString::to_string).unwrap_or_default();
            format!("{tenant} {id}")
        }
    };
    let own = Router::new().route("/nested", get(nested));
    let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).merge(own).build().unwrap();
    let (status, body) =
        send(&router, Request::get("/nested").header("x-tenant", "acme").header("x-request-id", "req-7")).await;
    assert_eq!((status, body.as_str()), (200, "globex req-7"));
}
