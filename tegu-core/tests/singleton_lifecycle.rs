//! Singletons: built once in dependency order, async init hooks (independent ones concurrently),
//! a failing init aborts the build and destroys what was built, shutdown in reverse order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::futures::UnitFuture as BoxFuture;
use tegu_core::{
    App, DiError, ProtoDef,
    error::BoxError,
    registry::{Dependency, InjectKind},
};

type Log = Arc<Mutex<Vec<String>>>;

#[derive(Default)]
struct Config;
#[derive(Default)]
struct Repo;
#[derive(Default)]
struct Service;

/// A singleton of type `T` whose init and destroy hooks append to `log`.
fn logged<T: Default + Send + Sync + 'static>(log: &Log, tag: &'static str) -> ProtoDef {
    let (on_init, on_destroy) = (log.clone(), log.clone());
    ProtoDef::singleton::<T>(|_| Ok(T::default()))
        .on_init(move |_: Arc<T>| {
            let log = on_init.clone();
            async move {
                log.lock().unwrap().push(format!("init {tag}"));
                Ok(())
            }
        })
        .on_destroy(move |_: Arc<T>| {
            let log = on_destroy.clone();
            async move {
                log.lock().unwrap().push(format!("destroy {tag}"));
                Ok(())
            }
        })
}

fn arc<T: 'static>() -> Dependency {
    Dependency::new::<T>(InjectKind::Arc, None)
}

fn chain(log: &Log) -> Vec<ProtoDef> {
    // Registered in the "wrong" order on purpose: dependents first.
    vec![
        logged::<Service>(log, "service").dep(arc::<Repo>()),
        logged::<Repo>(log, "repo").dep(arc::<Config>()),
        logged::<Config>(log, "config"),
    ]
}

#[tokio::test]
async fn init_runs_in_dependency_order_and_shutdown_destroys_in_reverse() {
    let log = Log::default();
    let app = App::builder().without_inventory().register_all(chain(&log)).build().await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["init config", "init repo", "init service"]);
    app.shutdown().await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["init config", "init repo", "init service", "destroy service", "destroy repo", "destroy config"]
    );
}

#[tokio::test]
async fn shutdown_runs_destroy_hooks_once() {
    let log = Log::default();
    let app = App::builder().without_inventory().register_all(chain(&log)).build().await.unwrap();
    app.shutdown().await.unwrap();
    app.clone().shutdown().await.unwrap();
    assert_eq!(log.lock().unwrap().iter().filter(|l| l.starts_with("destroy")).count(), 3);
}

#[tokio::test]
async fn singletons_are_built_once_and_shared() {
    let built = Arc::new(Mutex::new(0));
    let counter = built.clone();
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Config>(move |_| {
            *counter.lock().unwrap() += 1;
            Ok(Config)
        }))
        .register(ProtoDef::singleton::<Repo>(|r| r.arc::<Config>(0).map(|_| Repo)).dep(arc::<Config>()))
        .register(ProtoDef::singleton::<Service>(|r| r.arc::<Config>(0).map(|_| Service)).dep(arc::<Config>()))
        .build()
        .await
        .unwrap();
    let (a, b) = (app.get_object::<Config>().unwrap(), app.get_object::<Config>().unwrap());
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(*built.lock().unwrap(), 1);
}

#[tokio::test]
async fn independent_singletons_init_concurrently() {
    // Both init hooks wait for each other: run one after the other, they would never finish.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    fn waiting<T>(barrier: Arc<tokio::sync::Barrier>) -> impl Fn(Arc<T>) -> BoxFuture + Send + Sync {
        move |_| {
            let barrier = barrier.clone();
            Box::pin(async move {
                barrier.wait().await;
                Ok(())
            })
        }
    }
    let build = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Config>(|_| Ok(Config)).on_init(waiting::<Config>(barrier.clone())))
        .register(ProtoDef::singleton::<Repo>(|_| Ok(Repo)).on_init(waiting::<Repo>(barrier.clone())))
        .build();
    let app = tokio::time::timeout(Duration::from_secs(5), build).await.expect("init hooks ran one by one");
    assert!(app.is_ok());
}

#[tokio::test]
async fn failing_init_aborts_the_build_names_the_object_and_destroys_what_was_built() {
    let log = Log::default();
    let failing = {
        let log = log.clone();
        ProtoDef::singleton::<Repo>(|_| Ok(Repo)).name("mainRepo").dep(arc::<Config>()).on_init(move |_: Arc<Repo>| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push("init repo (fails)".into());
                Err::<(), BoxError>("database unreachable".into())
            }
        })
    };
    let err = App::builder()
        .without_inventory()
        .register(logged::<Service>(&log, "service").dep(arc::<Repo>()))
        .register(failing)
        .register(logged::<Config>(&log, "config"))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(&err, DiError::Hook { stage: "init", name, .. } if name == "mainRepo"), "{err:?}");
    assert_eq!(err.to_string(), "init of `singleton_lifecycle::Repo` (\"mainRepo\") failed: database unreachable",);
    // Config was built and inited, so it is destroyed; Service was never built.
    assert_eq!(*log.lock().unwrap(), ["init config", "init repo (fails)", "destroy config"]);
}

#[tokio::test]
async fn failing_factory_aborts_the_build() {
    let log = Log::default();
    let err = App::builder()
        .without_inventory()
        .register(logged::<Config>(&log, "config"))
        .register(
            ProtoDef::singleton::<Repo>(|_| Err(DiError::construction::<Repo>("repo", "no DATABASE_URL")))
                .dep(arc::<Config>()),
        )
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("construction of `singleton_lifecycle::Repo`"), "{err}");
    assert_eq!(*log.lock().unwrap(), ["init config", "destroy config"]);
}

#[tokio::test]
async fn failing_destroy_hooks_are_reported_after_all_ran() {
    let log = Log::default();
    let bad = |_: Arc<Repo>| async { Err::<(), BoxError>("flush failed".into()) };
    let app = App::builder()
        .without_inventory()
        .register(logged::<Config>(&log, "config"))
        .register(ProtoDef::singleton::<Repo>(|_| Ok(Repo)).dep(arc::<Config>()).on_destroy(bad))
        .build()
        .await
        .unwrap();
    let err = app.shutdown().await.unwrap_err();
    assert!(
        err.to_string().contains("destroy of `singleton_lifecycle::Repo` (\"repo\") failed: flush failed"),
        "{err}"
    );
    assert!(log.lock().unwrap().contains(&"destroy config".to_owned()));
}
