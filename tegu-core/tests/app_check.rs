//! `AppBuilder::check`: the graph, the configuration and the profiles validated with nothing
//! built. A broken App fails it with the error `build()` gives; a valid one runs no factory and
//! no hook.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::SystemTime;

use tegu_core::{
    App, AppBuilder, DiError, ProtoDef,
    error::BoxError,
    futures::{BoxFuture, UnitFuture},
    health::HealthCheck,
    registry::{Dependency, InjectKind},
    schedule::ScheduleLock,
};

struct Repo;
struct Db;
struct Tracer;
struct Cache;
#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct DbConfig {
    url: String,
    pool: u32,
}

impl HealthCheck for Db {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async { Ok(()) })
    }
}

fn dep<T: ?Sized + 'static>(kind: InjectKind) -> Dependency {
    Dependency::new::<T>(kind, None)
}

/// An App of only `defs`.
fn only(defs: impl IntoIterator<Item = ProtoDef>) -> AppBuilder {
    App::builder().without_inventory().register_all(defs)
}

/// Two locks that claim every run, for the role an App has one of.
impl ScheduleLock for Repo {
    fn claim<'a>(&'a self, _: &'a str, _: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
        Box::pin(async { Ok(true) })
    }
}
impl ScheduleLock for Db {
    fn claim<'a>(&'a self, _: &'a str, _: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
        Box::pin(async { Ok(true) })
    }
}

/// What a valid App's protos ran: factories and hooks alike.
#[derive(Default)]
struct Ran(AtomicUsize);

impl Ran {
    fn one(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An App of every kind of proto, each factory and hook counting into `ran`.
fn counted(ran: &Arc<Ran>) -> AppBuilder {
    let (a, b, c, d, e, f, g) =
        (ran.clone(), ran.clone(), ran.clone(), ran.clone(), ran.clone(), ran.clone(), ran.clone());
    App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<Db>(move |_| {
                a.one();
                Ok(Db)
            })
            .provides::<Db, dyn HealthCheck>(|d| d)
            .on_init(move |_: Arc<Db>| {
                b.one();
                async { Ok(()) }
            })
            .on_destroy(move |_: Arc<Db>| {
                c.one();
                async { Ok(()) }
            }),
        )
        .register(
            ProtoDef::new_async::<Repo, _, _>(tegu_core::registry::Lifetime::Singleton, move |_| {
                d.one();
                Ok(async { Ok(Repo) })
            })
            .dep(dep::<Db>(InjectKind::Arc))
            .dep(dep::<Tracer>(InjectKind::ContextRef)),
        )
        .register(
            ProtoDef::context::<Tracer>(move |_| {
                e.one();
                Ok(Tracer)
            })
            .on_complete(move |_: Arc<Tracer>| {
                f.one();
                async { Ok(()) }
            }),
        )
        .register(
            ProtoDef::singleton::<Cache>(move |_| {
                g.one();
                Ok(Cache)
            })
            .lazy(),
        )
        .register(ProtoDef::config::<DbConfig>("db"))
        .config_value("db.url", "sqlite::memory:")
        .config_value("db.pool", 4)
}

/// `check()`'s error and `build()`'s for the same App: both must fail, the same way.
async fn both_fail(app: impl Fn() -> AppBuilder) -> DiError {
    let checked = app().check().expect_err("check() should reject this App");
    let built = app().build().await.expect_err("build() should reject this App");
    assert_eq!(checked.to_string(), built.to_string(), "check() and build() disagree");
    assert_eq!(format!("{checked:?}"), format!("{built:?}"));
    checked
}

#[tokio::test]
async fn a_valid_app_checks_with_nothing_constructed_and_no_hook_run() {
    let ran = Arc::new(Ran::default());
    counted(&ran).check().expect("a valid App");
    assert_eq!(ran.0.load(Ordering::SeqCst), 0, "check() ran a factory or a hook");
    // The same builder does build, and then its factories and hooks run: the count can fail.
    let app = counted(&ran).build().await.expect("a valid App");
    assert!(ran.0.load(Ordering::SeqCst) >= 3, "build() ran the singletons' factories and init hooks");
    app.shutdown().await.expect("shut down");
}

#[tokio::test]
async fn a_missing_dependency_fails_as_build_does() {
    let ran = Arc::new(Ran::default());
    let err = both_fail(|| counted(&ran).exclude::<Db>()).await;
    assert!(err.to_string().contains("injects `app_check::Db`"), "{err}");
    assert!(err.to_string().contains("excluded by `AppBuilder::exclude`"), "{err}");
    assert_eq!(ran.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_cycle_fails_as_build_does() {
    let app = || {
        only([
            ProtoDef::singleton::<Repo>(|_| Ok(Repo)).dep(dep::<Db>(InjectKind::Arc)),
            ProtoDef::singleton::<Db>(|_| Ok(Db)).dep(dep::<Repo>(InjectKind::Arc)),
        ])
    };
    let err = both_fail(app).await;
    assert!(matches!(&err, DiError::Cycle { .. }), "{err}");
}

#[tokio::test]
async fn a_singleton_taking_a_context_object_by_value_fails_as_build_does() {
    let app = || {
        only([
            ProtoDef::singleton::<Cache>(|_| Ok(Cache)).dep(dep::<Tracer>(InjectKind::Arc)),
            ProtoDef::context::<Tracer>(|_| Ok(Tracer)),
        ])
    };
    let err = both_fail(app).await;
    assert!(matches!(&err, DiError::ContextByValue { .. }), "{err}");
}

#[tokio::test]
async fn configuration_errors_name_the_key_as_build_does() {
    let ran = Arc::new(Ran::default());
    let err = both_fail(|| counted(&ran).config_value("db.pool", "four")).await;
    assert!(matches!(&err, DiError::ConfigInvalid { key, .. } if key == "db.pool"), "{err}");
    let missing = || only([ProtoDef::config::<DbConfig>("db")]);
    let err = both_fail(missing).await;
    assert!(err.to_string().contains("db.url"), "{err}");
    assert_eq!(ran.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_proto_of_another_profile_is_named_as_build_names_it() {
    let app = || {
        only([
            ProtoDef::singleton::<Repo>(|_| Ok(Repo)).dep(dep::<Db>(InjectKind::Arc)),
            ProtoDef::singleton::<Db>(|_| Ok(Db)).profile("prod"),
        ])
        .profile("dev")
    };
    let err = both_fail(app).await;
    assert!(err.to_string().contains("profile \"prod\""), "{err}");
    assert!(app().profile("prod").check().is_ok());
}

#[tokio::test]
async fn roles_the_app_takes_at_build_are_checked() {
    // A health check must be a singleton: found before anything is built.
    let context_check = || only([ProtoDef::context::<Db>(|_| Ok(Db)).provides::<Db, dyn HealthCheck>(|d| d)]);
    let err = both_fail(context_check).await;
    assert!(matches!(&err, DiError::MustBeSingleton { role: "dyn HealthCheck", .. }), "{err}");
    // An App has at most one schedule lock, with or without jobs that would use it.
    let two_locks = || {
        only([
            ProtoDef::singleton::<Repo>(|_| Ok(Repo)).provides::<Repo, dyn ScheduleLock>(|l| l),
            ProtoDef::singleton::<Db>(|_| Ok(Db)).provides::<Db, dyn ScheduleLock>(|l| l),
        ])
    };
    let err = both_fail(two_locks).await;
    assert!(
        matches!(&err, DiError::OneOfRole { role: "dyn ScheduleLock", providers } if providers.len() == 2),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_override_fails_as_build_does() {
    let err = both_fail(|| only([]).override_with(Cache)).await;
    assert!(matches!(&err, DiError::OverrideUnknown { .. }), "{err}");
}

#[tokio::test]
async fn check_follows_roots_as_build_does() {
    let ran = Arc::new(Ran::default());
    // A root that is no proto fails both.
    let err = both_fail(|| counted(&ran).root::<String>()).await;
    assert!(matches!(&err, DiError::NotFound { .. }), "{err}");
    counted(&ran).root::<Repo>().check().expect("a root that is a proto");
    assert_eq!(ran.0.load(Ordering::SeqCst), 0);
}
