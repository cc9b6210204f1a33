//! Tenant scopes: `TenantRef<F>` reaches the current tenant's object, built once per tenant
//! while cached, evicted past `MAX_TENANTS` or after `IDLE` with its destroy hook run, rebuilt
//! on next use, and destroyed at shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{
    App, DiError, ProtoDef,
    error::BoxError,
    registry::{Dependency, InjectKind},
    tenant::{Tenant, TenantObjects, TenantRef},
};

/// A tenant's object: says whose it is, and which build of it.
#[derive(Debug)]
struct Db {
    tenant: String,
    build: usize,
}

/// What the tenant objects of a test did: builds and destroys per tenant.
#[derive(Default)]
struct Counts {
    built: Mutex<HashMap<String, usize>>,
    destroyed: Mutex<HashMap<String, usize>>,
}

impl Counts {
    fn build(&self, tenant: &Tenant) -> Db {
        let mut built = self.built.lock().unwrap();
        let count = built.entry(tenant.key().to_owned()).or_default();
        *count += 1;
        Db { tenant: tenant.key().to_owned(), build: *count }
    }

    fn destroy(&self, tenant: &Tenant, db: &Db) {
        assert_eq!(tenant.key(), db.tenant, "a destroy hook got another tenant's object");
        *self.destroyed.lock().unwrap().entry(tenant.key().to_owned()).or_default() += 1;
    }

    fn built(&self, tenant: &str) -> usize {
        self.built.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }

    fn destroyed(&self, tenant: &str) -> usize {
        self.destroyed.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }

    fn total(map: &Mutex<HashMap<String, usize>>) -> usize {
        map.lock().unwrap().values().sum()
    }
}

/// Tenant objects that count their builds and destroys, with the limits given.
macro_rules! counting {
    ($(#[$doc:meta])* $name:ident { $($limit:item)* }) => {
        $(#[$doc])*
        #[derive(Default)]
        struct $name(Counts);

        impl TenantObjects for $name {
            type Object = Db;
            $($limit)*

            async fn create(&self, tenant: &Tenant) -> Result<Db, BoxError> {
                tokio::task::yield_now().await; // concurrent first reads overlap here
                Ok(self.0.build(tenant))
            }

            async fn destroy(&self, tenant: &Tenant, db: Arc<Db>) -> Result<(), BoxError> {
                self.0.destroy(tenant, &db);
                Ok(())
            }
        }
    };
}

counting!(
    /// Room for every tenant of the tests.
    Roomy { const MAX_TENANTS: usize = 100_000; }
);
counting!(
    /// Room for 100.
    Tight { const MAX_TENANTS: usize = 100; }
);
counting!(
    /// Evicted after 100 ms unread.
    Brief { const IDLE: Duration = Duration::from_millis(100); }
);

/// Tenant objects whose hooks fail for some tenants: `create` errs for "err" and panics for
/// "panic" the first time; `destroy` panics for "bad".
#[derive(Default)]
struct Flaky(Counts, AtomicUsize);

impl TenantObjects for Flaky {
    type Object = Db;

    async fn create(&self, tenant: &Tenant) -> Result<Db, BoxError> {
        let attempt = self.1.fetch_add(1, Ordering::Relaxed);
        match tenant.key() {
            "err" if attempt == 0 => Err("the tenant's database is down".into()),
            "panic" if attempt == 0 => panic!("create panicked"),
            _ => Ok(self.0.build(tenant)),
        }
    }

    async fn destroy(&self, tenant: &Tenant, db: Arc<Db>) -> Result<(), BoxError> {
        if tenant.key() == "bad" {
            panic!("destroy panicked");
        }
        self.0.destroy(tenant, &db);
        Ok(())
    }
}

/// A singleton that reaches the tenant objects, as a service would.
struct Service<F: TenantObjects> {
    dbs: Arc<TenantRef<F>>,
}

/// A singleton `H` made from a `TenantRef<F>`, registered by hand: it brings the cache along.
fn holder<F: TenantObjects, H: Send + Sync + 'static>(make: fn(Arc<TenantRef<F>>) -> H) -> ProtoDef {
    ProtoDef::singleton::<H>(move |r| Ok(make(r.arc(0)?)))
        .dep(Dependency::new::<TenantRef<F>>(InjectKind::Arc, None))
        .also(ProtoDef::tenants::<F>)
}

async fn app<F: TenantObjects + Default>() -> (App, Arc<Service<F>>, Arc<F>) {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<F>(|_| Ok(F::default())))
        .register(holder::<F, _>(|dbs| Service { dbs }))
        .build()
        .await
        .unwrap();
    let service = app.get_object::<Service<F>>().unwrap();
    let objects = app.get_object::<F>().unwrap();
    (app, service, objects)
}

/// What tenant `key`'s request reads from `service`.
async fn read<F: TenantObjects<Object = Db>>(app: &App, service: &Service<F>, key: &str) -> Arc<Db> {
    app.scope().tenant(key).unwrap().run(async { service.dbs.get().await.unwrap() }).await
}

/// The acceptance test: 10,000 tenants through one singleton, three concurrent requests each,
/// each reading twice across awaits. Each tenant's object is built once, and no request sees
/// another tenant's object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tenants_each_built_once_and_never_mixed_up() {
    let (app, service, objects) = app::<Roomy>().await;
    let app = Arc::new(app);
    let mixed = Arc::new(AtomicUsize::new(0));
    let requests: Vec<_> = (0..30_000)
        .map(|i| {
            let (app, service, mixed) = (Arc::clone(&app), Arc::clone(&service), Arc::clone(&mixed));
            tokio::spawn(async move {
                let key = format!("tenant-{}", i % 10_000);
                let scope = app.scope().tenant(key.as_str()).unwrap();
                scope
                    .run(async {
                        let first = service.dbs.get().await.unwrap();
                        tokio::task::yield_now().await;
                        let second = service.dbs.get().await.unwrap();
                        if first.tenant != key || !Arc::ptr_eq(&first, &second) {
                            mixed.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                    .await;
            })
        })
        .collect();
    for request in requests {
        request.await.unwrap();
    }
    assert_eq!(mixed.load(Ordering::Relaxed), 0, "requests saw another tenant's object");
    let built = objects.0.built.lock().unwrap().clone();
    assert_eq!(built.len(), 10_000);
    assert!(built.values().all(|&n| n == 1), "a tenant's object was built more than once while cached");
    assert_eq!(service.dbs.cached(), 10_000);

    app.shutdown().await.unwrap();
    assert_eq!(Counts::total(&objects.0.destroyed), 10_000, "shutdown left cached tenant objects undestroyed");
    assert!((0..10_000).all(|i| objects.0.destroyed(&format!("tenant-{i}")) == 1));
}

/// Past `MAX_TENANTS`, the least recently used is evicted and destroyed; it is rebuilt on its
/// next read. Shutdown destroys the rest: every object built is destroyed once.
#[tokio::test]
async fn past_the_limit_the_least_recently_used_is_evicted_and_rebuilt_on_next_use() {
    let (app, service, objects) = app::<Tight>().await;
    for i in 0..100 {
        read(&app, &service, &format!("t{i}")).await;
    }
    assert_eq!((service.dbs.cached(), Counts::total(&objects.0.destroyed)), (100, 0));
    read(&app, &service, "t0").await; // t0 is now the most recent; t1 the least
    read(&app, &service, "t100").await;
    assert_eq!(service.dbs.cached(), 100);
    let destroyed = wait_until(|| objects.0.destroyed("t1") == 1).await;
    assert!(destroyed, "the least recently used tenant was not destroyed");
    assert_eq!(objects.0.destroyed("t0"), 0, "a recently used tenant was evicted");

    let again = read(&app, &service, "t1").await;
    assert_eq!((again.tenant.as_str(), again.build), ("t1", 2), "an evicted tenant was not rebuilt");

    // 10,000 tenants through a cache of 100.
    for i in 0..10_000 {
        read(&app, &service, &format!("many-{i}")).await;
    }
    assert_eq!(service.dbs.cached(), 100);
    app.shutdown().await.unwrap();
    let (built, destroyed) = (Counts::total(&objects.0.built), Counts::total(&objects.0.destroyed));
    assert_eq!(built, 10_102);
    assert_eq!(destroyed, built, "every object built is destroyed once, evicted or at shutdown");
}

/// An object unread for `IDLE` is evicted and destroyed; the next read builds a new one.
#[tokio::test]
async fn an_idle_object_is_evicted_and_rebuilt() {
    let (app, service, objects) = app::<Brief>().await;
    let first = read(&app, &service, "acme").await;
    assert!(wait_until(|| objects.0.destroyed("acme") == 1).await, "the idle object was not destroyed");
    assert_eq!(service.dbs.cached(), 0);
    let second = read(&app, &service, "acme").await;
    assert_eq!((first.build, second.build), (1, 2));
    app.shutdown().await.unwrap();
    assert_eq!(objects.0.destroyed("acme"), 2);
}

/// A failed or panicking `create` fails the read and caches nothing: the next read builds.
/// A panicking destroy hook is logged, and the other objects are still destroyed.
#[tokio::test]
async fn failing_hooks_cache_nothing_and_harm_no_other_tenant() {
    let (app, service, objects) = app::<Flaky>().await;
    let failed = app.scope().tenant("err").unwrap().run(async { service.dbs.get().await }).await;
    let error = failed.unwrap_err();
    assert!(matches!(&error, DiError::Construction { name, .. } if name.contains("tenant \"err\"")), "{error}");
    assert!(error.to_string().contains("database is down"), "{error}");
    assert_eq!(service.dbs.cached(), 0);
    assert_eq!(read(&app, &service, "err").await.tenant, "err"); // built on the next read

    objects.1.store(0, Ordering::Relaxed);
    let panicked = app.scope().tenant("panic").unwrap().run(async { service.dbs.get().await }).await;
    assert!(panicked.unwrap_err().to_string().contains("create panicked"));
    assert_eq!(read(&app, &service, "panic").await.tenant, "panic");

    read(&app, &service, "bad").await;
    read(&app, &service, "good").await;
    app.shutdown().await.unwrap();
    assert_eq!((objects.0.destroyed("good"), objects.0.destroyed("err")), (1, 1));
}

/// A read without a tenant names what was asked for and how to give one; outside a scope, it
/// fails as a `ContextRef` does.
#[tokio::test]
async fn a_scope_without_a_tenant_is_told_how_to_give_one() {
    let (app, service, _) = app::<Roomy>().await;
    let error = app.run_in_context(async { service.dbs.get().await }).await.unwrap_err();
    assert!(matches!(error, DiError::NoTenant { wanted } if wanted.ends_with("Roomy")), "{error}");
    assert!(error.to_string().contains("app.scope().tenant(key)"), "{error}");
    assert!(matches!(service.dbs.get().await, Err(DiError::NoScope { .. })));
    // An App without tenant objects refuses a tenant, naming the type.
    let plain = App::builder().without_inventory().build().await.unwrap();
    assert!(matches!(plain.scope().tenant("acme"), Err(DiError::NotFound { .. })));
}

/// Two holders of `TenantRef<F>` share one cache: the proto is brought once.
#[tokio::test]
async fn two_holders_share_one_cache() {
    struct Other {
        dbs: Arc<TenantRef<Roomy>>,
    }
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Roomy>(|_| Ok(Roomy::default())))
        .register(holder::<Roomy, _>(|dbs| Service { dbs }))
        .register(holder::<Roomy, _>(|dbs| Other { dbs }))
        .build()
        .await
        .unwrap();
    let (service, other) = (app.get_object::<Service<Roomy>>().unwrap(), app.get_object::<Other>().unwrap());
    let (a, b) = app
        .scope()
        .tenant("acme")
        .unwrap()
        .run(async { (service.dbs.get().await.unwrap(), other.dbs.get().await.unwrap()) })
        .await;
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(app.get_object::<Roomy>().unwrap().0.built("acme"), 1);
}

/// Polls `done` for up to 20 s (eviction's destroy hooks run in tasks of their own).
async fn wait_until(done: impl Fn() -> bool) -> bool {
    for _ in 0..2_000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

/// Tenant objects declared with the attributes: the singleton that builds them is a
/// `#[singleton_proto]`, and `#[inject] x: TenantRef<F>` brings the cache along.
#[tegu_core::singleton_proto]
struct AnnotatedDbs {
    counts: Counts,
}

impl TenantObjects for AnnotatedDbs {
    type Object = Db;

    async fn create(&self, tenant: &Tenant) -> Result<Db, BoxError> {
        Ok(self.counts.build(tenant))
    }

    async fn destroy(&self, tenant: &Tenant, db: Arc<Db>) -> Result<(), BoxError> {
        self.counts.destroy(tenant, &db);
        Ok(())
    }
}

#[tegu_core::singleton_proto]
struct AnnotatedService {
    #[inject]
    dbs: TenantRef<AnnotatedDbs>,
}

#[tokio::test]
async fn the_attributes_bring_the_tenant_objects_along() {
    let app = App::builder().root::<AnnotatedService>().build().await.unwrap();
    let service = app.get_object::<AnnotatedService>().unwrap();
    for key in ["acme", "globex", "acme"] {
        let db = app.scope().tenant(key).unwrap().run(async { service.dbs.get().await.unwrap() }).await;
        assert_eq!(db.tenant, key);
    }
    let dbs = app.get_object::<AnnotatedDbs>().unwrap();
    assert_eq!((dbs.counts.built("acme"), dbs.counts.built("globex")), (1, 1));
    app.shutdown().await.unwrap();
    assert_eq!(Counts::total(&dbs.counts.destroyed), 2);
}

counting!(
    /// Room for 4.
    Four { const MAX_TENANTS: usize = 4; }
);
counting!(
    /// Never idle: `IDLE` too long to count.
    Forever { const IDLE: Duration = Duration::MAX; }
);

/// A tenant key comes from a client (a header, a host): one that would forge fields of a log
/// line is refused, naming the rule and not the key; so are an empty key and a long one. A
/// key in a log line is quoted.
#[test]
fn a_tenant_key_is_checked_and_written_quoted() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (app, service, _) = app::<Flaky>().await;
            for key in ["acme user=admin status=ok", "", &"a".repeat(129), "acme\nERROR forged", "ac\u{e9}me"] {
                let refused = app.scope().tenant(key);
                let Err(error @ DiError::TenantKey { .. }) = &refused else { panic!("{key:?} was taken") };
                assert!(!error.to_string().contains("admin") && !error.to_string().contains("forged"), "{error}");
            }
            read(&app, &service, "bad").await; // its destroy hook panics, and is logged
            app.shutdown().await.unwrap();
        });
    });
    assert!(logs.contains(r#"tenant="bad""#), "{logs}");
}

/// After a burst of concurrent first reads of new tenants, the cache returns to its bound once
/// their builds end, destroying the least recently read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_burst_of_new_tenants_the_cache_returns_to_its_bound() {
    let (app, service, objects) = app::<Four>().await;
    let reads: Vec<_> = (0..50)
        .map(|i| {
            let (app, service) = (app.clone(), Arc::clone(&service));
            tokio::spawn(async move { read(&app, &service, &format!("burst-{i}")).await })
        })
        .collect();
    for read in reads {
        read.await.unwrap();
    }
    assert_eq!(service.dbs.cached(), 4);
    assert!(wait_until(|| Counts::total(&objects.0.destroyed) == 46).await, "the evicted were not destroyed");
    app.shutdown().await.unwrap();
    assert_eq!(Counts::total(&objects.0.destroyed), 50);
}

/// Tenant objects whose `create` waits to be let go, and fails for "down".
#[derive(Default)]
struct Gated {
    creates: AtomicUsize,
    go: tokio::sync::Notify,
    in_scope: Mutex<Vec<bool>>,
}

impl TenantObjects for Gated {
    type Object = String;

    async fn create(&self, tenant: &Tenant) -> Result<String, BoxError> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        self.in_scope.lock().unwrap().push(tegu_core::scope::in_scope());
        self.go.notified().await;
        if tenant.key() == "down" { Err("the tenant's database is down".into()) } else { Ok(tenant.key().to_owned()) }
    }
}

/// Concurrent first reads of a tenant share one `create`, owned by the cache: its error goes to
/// all of them at once, a first reader that goes away does not restart it, and it runs outside
/// the readers' scopes (it cannot capture a request's objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_reads_share_one_create_that_the_cache_owns() {
    let (app, service, objects) = app::<Gated>().await;
    let mut reads: Vec<_> = (0..8)
        .map(|_| {
            let (app, service) = (app.clone(), Arc::clone(&service));
            Box::pin(async move { app.scope().tenant("down").unwrap().run(async { service.dbs.get().await }).await })
        })
        .collect();
    // Each read polled once from this task: its first poll finds the tenant's build (or starts
    // it) before it waits, so all eight wait on the one create before it is let go. (Spawned,
    // a reader the scheduler starts late would find the create already failed and start
    // another, which waits for ever.)
    std::future::poll_fn(|cx| {
        for read in &mut reads {
            assert!(read.as_mut().poll(cx).is_pending(), "the create waits to be let go");
        }
        std::task::Poll::Ready(())
    })
    .await;
    tegu_test_support::eventually(async || (objects.creates.load(Ordering::SeqCst) == 1).then_some(())).await;
    objects.go.notify_one();
    for read in reads {
        let error = read.await.unwrap_err();
        assert!(error.to_string().contains("database is down"), "{error}");
    }
    assert_eq!(objects.creates.load(Ordering::SeqCst), 1, "one create for the eight reads");
    // A first reader that goes away: the next reader waits for the same create.
    let gone = tokio::time::timeout(
        Duration::from_millis(50),
        app.scope().tenant("acme").unwrap().run(async { service.dbs.get().await }),
    )
    .await;
    assert!(gone.is_err(), "still building");
    let waiting = tokio::spawn({
        let (app, service) = (app.clone(), Arc::clone(&service));
        async move { app.scope().tenant("acme").unwrap().run(async { service.dbs.get().await.unwrap() }).await }
    });
    objects.go.notify_one();
    assert_eq!(*waiting.await.unwrap(), "acme");
    assert_eq!(objects.creates.load(Ordering::SeqCst), 2, "the cancelled reader's create was not started again");
    // In a scope of its own (tenant_create.rs: none of a reader's objects).
    assert_eq!(*objects.in_scope.lock().unwrap(), [true, true], "create ran outside a scope");
    app.shutdown().await.unwrap();
}

/// Tenant objects whose destroy hook takes 20 ms, counting how many run at once.
#[derive(Default)]
struct SlowToClose {
    running: AtomicUsize,
    most: AtomicUsize,
    destroyed: AtomicUsize,
}

impl TenantObjects for SlowToClose {
    type Object = ();
    const MAX_TENANTS: usize = 100_000;

    async fn create(&self, _: &Tenant) -> Result<(), BoxError> {
        Ok(())
    }

    async fn destroy(&self, _: &Tenant, _: Arc<()>) -> Result<(), BoxError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.destroyed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Shutdown destroys the cached objects concurrently, `DESTROY_AT_ONCE` (64) at a time: 10,000
/// tenants whose destroy takes 20 ms are all destroyed within a 10 s stop deadline (one at a
/// time, it would take 200 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_destroys_ten_thousand_tenants_within_the_stop_deadline() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<SlowToClose>(|_| Ok(SlowToClose::default())))
        .register(holder::<SlowToClose, _>(|dbs| Service { dbs }))
        .stop_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    let service = app.get_object::<Service<SlowToClose>>().unwrap();
    for i in 0..10_000 {
        app.scope().tenant(format!("t{i}")).unwrap().run(async { service.dbs.get().await.unwrap() }).await;
    }
    app.shutdown().await.unwrap();
    let objects = app.get_object::<SlowToClose>().unwrap();
    assert_eq!(objects.destroyed.load(Ordering::SeqCst), 10_000);
    assert!(objects.most.load(Ordering::SeqCst) <= 64, "more destroy hooks at once than DESTROY_AT_ONCE");
}

/// Once shutdown has closed the cache, a read is refused: an object built then would never be
/// destroyed.
#[tokio::test]
async fn a_read_after_shutdown_builds_nothing() {
    let (app, service, objects) = app::<Roomy>().await;
    read(&app, &service, "acme").await;
    app.shutdown().await.unwrap();
    let late = app.scope().tenant("late").unwrap().run(async { service.dbs.get().await }).await;
    assert!(matches!(late, Err(DiError::ShutDown { .. })), "{late:?}");
    assert_eq!((objects.0.built("late"), objects.0.destroyed("acme")), (0, 1));
}

/// An `IDLE` too long to count (`Duration::MAX`) keeps objects for ever: no sweep, no panic.
#[tokio::test]
async fn an_idle_time_too_long_to_count_never_evicts() {
    let (app, service, objects) = app::<Forever>().await;
    read(&app, &service, "acme").await;
    app.shutdown().await.unwrap();
    assert_eq!(objects.0.destroyed("acme"), 1);
}

/// Tenant objects whose `create` waits to be let go, counting their destroys.
#[derive(Default)]
struct SlowBuild {
    creates: AtomicUsize,
    go: tokio::sync::Notify,
    destroyed: AtomicUsize,
}

impl TenantObjects for SlowBuild {
    type Object = ();

    async fn create(&self, _: &Tenant) -> Result<(), BoxError> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        self.go.notified().await;
        Ok(())
    }

    async fn destroy(&self, _: &Tenant, _: Arc<()>) -> Result<(), BoxError> {
        self.destroyed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A build under way when shutdown closes the cache: shutdown waits for it, and what it builds
/// is destroyed before shutdown returns, not left to a task nothing awaits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_under_way_at_shutdown_is_waited_for_and_what_it_built_destroyed() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<SlowBuild>(|_| Ok(SlowBuild::default())))
        .register(holder::<SlowBuild, _>(|dbs| Service { dbs }))
        .build()
        .await
        .unwrap();
    let (service, objects) = (app.get_object::<Service<SlowBuild>>().unwrap(), app.get_object::<SlowBuild>().unwrap());
    let read = tokio::spawn({
        let (app, service) = (app.clone(), Arc::clone(&service));
        async move { app.scope().tenant("acme").unwrap().run(async { service.dbs.get().await }).await }
    });
    tegu_test_support::eventually(async || (objects.creates.load(Ordering::SeqCst) == 1).then_some(())).await;
    let shutdown = tokio::spawn({
        let app = app.clone();
        async move { app.shutdown().await }
    });
    // Let shutdown reach the cache (the read's own scope is still running, so it cannot end
    // before the build does).
    tokio::time::sleep(Duration::from_millis(50)).await;
    objects.go.notify_one();
    let _ = read.await.unwrap();
    shutdown.await.unwrap().unwrap();
    assert_eq!(objects.destroyed.load(Ordering::SeqCst), 1, "what the build made was not destroyed");
}

#[tokio::test]
async fn a_scope_opened_inside_another_keeps_its_lineage_but_what_the_builder_sets() {
    use tegu_core::lineage::{Lineage, TraceContext};
    let app = App::builder().without_inventory().lineage::<Tenant>().lineage::<TraceContext>().build().await.unwrap();
    let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let request = Lineage::new().with(Tenant::new("acme").unwrap()).with(trace);
    let (tenant, kept) = app
        .scope()
        .lineage(&request)
        .run(async {
            // An admin request doing work for another tenant: the trace stays the request's.
            let nested = app.scope().tenant("globex").unwrap().run(async { Lineage::current() }).await;
            let kept = app.scope().run(async { Lineage::current() }).await;
            (nested, kept)
        })
        .await;
    assert_eq!(tenant.get::<Tenant>().map(Tenant::key), Some("globex"));
    assert_eq!(tenant.get::<TraceContext>(), Some(&trace), "the nested scope dropped the request's trace");
    assert_eq!(kept.get::<Tenant>().map(Tenant::key), Some("acme"));
    // Outside any scope, a scope starts with nothing.
    assert!(app.scope().run(async { Lineage::current() }).await.is_empty());
}
