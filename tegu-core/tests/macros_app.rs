//! The attribute macros end to end, through the public API only: singletons, `ContextRef`,
//! qualifiers, trait objects, collections, optionals, lifecycle order, `get_object`, fakes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{App, AsyncContextRef, DiError, context_proto, singleton_proto};

/// Records lifecycle events across the whole test binary, per test by prefix.
static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn event(e: impl Into<String>) {
    EVENTS.lock().unwrap().push(e.into());
}

fn events(prefix: &str) -> Vec<String> {
    EVENTS.lock().unwrap().iter().filter(|e| e.starts_with(prefix)).cloned().collect()
}

static REQUEST_IDS: AtomicU64 = AtomicU64::new(1);

/// The tegg article's per-request tracer.
#[derive(Debug)]
#[context_proto(init = start, destroy = finish)]
struct Tracer {
    id: AtomicU64,
}

impl Tracer {
    async fn start(&self) {
        self.id.store(REQUEST_IDS.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        event(format!("lifecycle: tracer {} start", self.id()));
    }
    async fn finish(&self) {
        event(format!("lifecycle: tracer {} finish", self.id()));
    }
    fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }
}

trait Store: Send + Sync {
    fn kind(&self) -> &'static str;
}

#[singleton_proto(name = "primary", provides(dyn Store), init = connect, destroy = close)]
struct Postgres;

impl Postgres {
    async fn connect(&self) -> Result<(), std::io::Error> {
        event("lifecycle: postgres connect");
        Ok(())
    }
    async fn close(&self) {
        event("lifecycle: postgres close");
    }
}

impl Store for Postgres {
    fn kind(&self) -> &'static str {
        "postgres"
    }
}

#[singleton_proto(name = "cache", provides(dyn Store))]
struct Memory;

impl Store for Memory {
    fn kind(&self) -> &'static str {
        "memory"
    }
}

/// A proto nothing registers an instance of: the optional dependency stays empty.
struct Metrics;

#[singleton_proto(init = ready, destroy = stop)]
struct HelloService {
    #[inject(name = "primary")]
    store: Arc<dyn Store>,
    #[inject]
    stores: Vec<Arc<dyn Store>>,
    #[inject]
    memory: Option<Arc<Memory>>,
    #[inject]
    tracer: AsyncContextRef<Tracer>,
    calls: AtomicU64,
}

impl HelloService {
    async fn ready(&self) {
        event("lifecycle: hello service ready");
    }
    async fn stop(&self) {
        event("lifecycle: hello service stop");
    }
    async fn hello(&self, name: &str) -> String {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let tracer = self.tracer.get_async().await.unwrap();
        format!("[{}] hello, {name} (from {})", tracer.id(), self.store.kind())
    }
}

/// The tegg article's controller: a singleton, like every service it calls.
#[singleton_proto]
struct HelloWorldController {
    #[inject]
    service: Arc<HelloService>,
    #[inject]
    tracer: AsyncContextRef<Tracer>,
}

impl HelloWorldController {
    async fn get(&self, name: &str) -> (u64, String) {
        let reply = self.service.hello(name).await;
        (self.tracer.get_async().await.unwrap().id(), reply)
    }
}

#[tokio::test]
async fn each_request_gets_its_own_tracer_through_singletons() {
    let app = App::builder().build().await.unwrap();
    let controller = app.get_object::<HelloWorldController>().unwrap();
    let (a, b) = tokio::join!(app.run_in_context(controller.get("ada")), app.run_in_context(controller.get("bob")));
    assert_ne!(a.0, b.0);
    assert_eq!(a.1, format!("[{}] hello, ada (from postgres)", a.0));
    assert_eq!(b.1, format!("[{}] hello, bob (from postgres)", b.0));
    assert!(Arc::ptr_eq(&controller.service, &app.get_object::<HelloService>().unwrap()));
}

#[tokio::test]
async fn qualifiers_collections_and_optionals() {
    let app = App::builder().build().await.unwrap();
    let service = app.get_object::<HelloService>().unwrap();
    assert_eq!(service.store.kind(), "postgres");
    // Ordered by object name: "cache" before "primary".
    assert_eq!(service.stores.iter().map(|s| s.kind()).collect::<Vec<_>>(), ["memory", "postgres"]);
    assert!(service.memory.is_some());
    assert_eq!(service.calls.load(Ordering::Relaxed), 0, "plain fields start from Default");
}

#[tokio::test]
async fn lifecycle_hooks_run_in_order() {
    let app = App::builder().build().await.unwrap();
    let controller = app.get_object::<HelloWorldController>().unwrap();
    let (id, _) = app.run_in_context(controller.get("eve")).await;
    app.shutdown().await.unwrap();
    let all = events("lifecycle:");
    let pos = |e: &str| all.iter().position(|x| x == e).unwrap_or_else(|| panic!("missing {e:?} in {all:?}"));
    assert!(pos("lifecycle: postgres connect") < pos("lifecycle: hello service ready"));
    assert!(pos(&format!("lifecycle: tracer {id} start")) < pos(&format!("lifecycle: tracer {id} finish")));
    let stops: Vec<&String> = all.iter().filter(|e| e.ends_with("stop") || e.ends_with("close")).collect();
    assert_eq!(stops, ["lifecycle: hello service stop", "lifecycle: postgres close"], "dependents first");
}

#[tokio::test]
async fn get_object_for_context_protos_needs_a_scope() {
    let app = App::builder().build().await.unwrap();
    assert!(matches!(app.get_object::<Tracer>(), Err(DiError::AsyncInit { .. } | DiError::NoScope { .. })));
    let err = app.get_object::<Tracer>().unwrap_err();
    assert!(err.to_string().contains("Tracer"), "{err}");
}

/// A clock that tests can freeze.
#[singleton_proto]
struct Clock {
    frozen: Option<u64>,
}

impl Clock {
    fn now(&self) -> u64 {
        self.frozen
            .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())
    }
}

#[singleton_proto]
struct Stamper {
    #[inject]
    clock: Arc<Clock>,
}

#[tokio::test]
async fn override_replaces_a_proto_with_a_fake_for_everyone_who_injects_it() {
    let app = App::builder().override_with(Clock { frozen: Some(42) }).build().await.unwrap();
    assert_eq!(app.get_object::<Stamper>().unwrap().clock.now(), 42);
    let real = App::builder().build().await.unwrap();
    assert!(real.get_object::<Stamper>().unwrap().clock.now() > 42);
    let err = App::builder().override_with(Metrics).build().await.unwrap_err();
    assert!(matches!(err, DiError::OverrideUnknown { .. }));
}
