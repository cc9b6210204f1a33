//! Health checks and readiness: each check runs within its timeout, concurrently, its results
//! reused for the cache's time to live; readiness follows the checks and the lifecycle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tegu_core::{
    App, DiError, ProtoDef,
    futures::UnitFuture,
    health::{AppState, HealthCheck},
};

#[derive(Default)]
struct Database {
    down: AtomicBool,
    calls: AtomicUsize,
}

impl HealthCheck for Database {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            if self.down.load(Ordering::SeqCst) { Err("connection refused by 10.0.0.7".into()) } else { Ok(()) }
        })
    }
}

struct Hangs;

impl HealthCheck for Hangs {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(std::future::pending())
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(50)
    }
}

struct Panics;

impl HealthCheck for Panics {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async { panic!("the check broke") })
    }
}

fn database() -> ProtoDef {
    ProtoDef::singleton::<Database>(|_| Ok(Database::default()))
        .name("database")
        .provides::<Database, dyn HealthCheck>(|d| d)
}

#[tokio::test]
async fn a_failing_check_makes_the_app_unready_but_live_and_names_itself() {
    let app =
        App::builder().without_inventory().register(database()).health_cache(Duration::ZERO).build().await.unwrap();
    let health = app.health().await;
    assert!(health.live && health.ready, "{health:?}");
    assert_eq!(health.checks.len(), 1);
    assert_eq!(health.checks[0].name, "database");
    assert!(health.checks[0].ok && health.checks[0].took >= Duration::from_millis(20));

    app.get_object::<Database>().unwrap().down.store(true, Ordering::SeqCst);
    let health = app.health().await;
    assert!(health.live && !health.ready, "{health:?}");
    assert!(!health.checks[0].ok);
    assert_eq!(health.checks[0].error.as_deref(), Some("connection refused by 10.0.0.7"));
    assert_eq!(health.state, AppState::Serving);
}

#[tokio::test]
async fn checks_run_concurrently_each_within_its_timeout_and_a_panic_fails_only_its_own() {
    let app = App::builder()
        .without_inventory()
        .register(database())
        .register(ProtoDef::singleton::<Hangs>(|_| Ok(Hangs)).name("hangs").provides::<Hangs, dyn HealthCheck>(|h| h))
        .register(
            ProtoDef::singleton::<Panics>(|_| Ok(Panics)).name("panics").provides::<Panics, dyn HealthCheck>(|p| p),
        )
        .build()
        .await
        .unwrap();
    let health = tokio::time::timeout(Duration::from_secs(10), app.health()).await.expect("the checks are bounded");
    assert!(!health.ready);
    let by_name = |name: &str| health.checks.iter().find(|c| c.name == name).unwrap().clone();
    assert!(by_name("database").ok);
    let hangs = by_name("hangs");
    assert!(!hangs.ok && hangs.error.as_deref().unwrap().contains("timed out"), "{hangs:?}");
    let panics = by_name("panics");
    assert!(!panics.ok && panics.error.as_deref().unwrap().contains("the check broke"), "{panics:?}");
}

#[tokio::test]
async fn results_are_reused_for_the_cache_time_and_concurrent_probes_share_one_run() {
    let app = App::builder()
        .without_inventory()
        .register(database())
        .health_cache(Duration::from_secs(60))
        .build()
        .await
        .unwrap();
    let probes: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.health().await })
        })
        .collect();
    for probe in probes {
        assert!(probe.await.unwrap().ready);
    }
    let db = app.get_object::<Database>().unwrap();
    assert_eq!(db.calls.load(Ordering::SeqCst), 1, "fifty probes, one run");
    db.down.store(true, Ordering::SeqCst);
    assert!(app.health().await.ready, "within the cache time, the last result");
    assert_eq!(db.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn readiness_turns_false_when_shutdown_begins_and_liveness_when_it_is_done() {
    let app = App::builder().without_inventory().register(database()).build().await.unwrap();
    assert!(app.health().await.ready);
    app.begin_shutdown();
    let health = app.health().await;
    assert!(health.live && !health.ready && health.state == AppState::Stopping, "{health:?}");
    app.shutdown().await.unwrap();
    let health = app.health().await;
    assert!(!health.live && !health.ready && health.state == AppState::Stopped, "{health:?}");
}

#[tokio::test]
async fn a_context_proto_cannot_be_a_health_check() {
    let error = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Panics>(|_| Ok(Panics)).provides::<Panics, dyn HealthCheck>(|p| p))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(error, DiError::MustBeSingleton { role: "dyn HealthCheck", .. }), "{error}");
}
