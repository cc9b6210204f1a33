//! A tenant's object is built in a scope of its own, seeded with the tenant and nothing of the
//! request whose read started the build: its context objects are its own, completed and
//! destroyed when the build ends. At shutdown, one tenant's stuck `create` (or an evicted
//! object's stuck destroy) keeps no other tenant's object from being destroyed before the stop
//! deadline.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::error::BoxError;
use tegu_core::tenant::{Tenant, TenantObjects, TenantRef};
use tegu_core::{App, ContextRef, DiError, context_proto, singleton_proto};

/// One per scope: says which scope, completed and destroyed with it.
#[context_proto(complete = completed, destroy = destroyed)]
#[derive(Default)]
pub struct Unit {
    journal: Mutex<Vec<String>>,
}

impl Unit {
    async fn completed(&self) {
        self.journal.lock().unwrap().push("completed".into());
        JOURNAL.lock().unwrap().push("unit completed".into());
    }

    async fn destroyed(&self) {
        JOURNAL.lock().unwrap().push("unit destroyed".into());
    }
}

static JOURNAL: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A tenant's settings, as its `create` saw its scope.
pub struct Settings {
    tenant: String,
    unit: usize,
}

#[singleton_proto]
pub struct Loader {
    #[inject]
    tenant: ContextRef<Tenant>,
    #[inject]
    unit: ContextRef<Unit>,
}

impl TenantObjects for Loader {
    type Object = Settings;

    async fn create(&self, tenant: &Tenant) -> Result<Settings, BoxError> {
        let seen = self.tenant.try_get()?;
        assert_eq!(seen.key(), tenant.key(), "the scope's tenant is the one being built");
        let unit = self.unit.try_get()?;
        unit.journal.lock().unwrap().push("used by create".into());
        Ok(Settings { tenant: seen.key().to_owned(), unit: Arc::as_ptr(&unit) as usize })
    }
}

#[singleton_proto]
pub struct Service {
    #[inject]
    settings: TenantRef<Loader>,
    #[inject]
    unit: ContextRef<Unit>,
}

#[tokio::test]
async fn a_tenants_create_runs_in_a_scope_of_its_own_seeded_with_the_tenant() {
    let app = App::builder().build().await.unwrap();
    let service = app.get_object::<Service>().unwrap();
    let (settings, request_unit) = app
        .scope()
        .tenant("acme")
        .unwrap()
        .run(async {
            let request_unit = Arc::as_ptr(&service.unit.get()) as usize;
            (service.settings.get().await, request_unit)
        })
        .await;
    let settings = settings.expect("create ran in a scope with the tenant");
    assert_eq!(settings.tenant, "acme");
    assert_ne!(settings.unit, request_unit, "create used the request's context object");
    // The build's scope completed and ended before the read returned; the request's after.
    let journal = JOURNAL.lock().unwrap().clone();
    assert_eq!(journal[..2], ["unit completed", "unit destroyed"], "{journal:?}");
    app.shutdown().await.unwrap();
}

/// Tenant objects whose `create` of tenant `stuck` never ends, and whose destroy of the first
/// tenant evicted never ends: the others are counted.
#[singleton_proto]
#[derive(Default)]
pub struct Stuck {
    destroyed: AtomicUsize,
    evicted: AtomicUsize,
}

impl TenantObjects for Stuck {
    type Object = ();
    const MAX_TENANTS: usize = 20;

    async fn create(&self, tenant: &Tenant) -> Result<(), BoxError> {
        if tenant.key() == "stuck" {
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    async fn destroy(&self, tenant: &Tenant, _: Arc<()>) -> Result<(), BoxError> {
        if tenant.key() == "evicted" {
            self.evicted.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        self.destroyed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[singleton_proto]
pub struct Holder {
    #[inject]
    objects: TenantRef<Stuck>,
}

async fn read(app: &App, holder: &Arc<Holder>, key: &str) -> Result<Arc<()>, DiError> {
    app.scope().tenant(key).unwrap().run(async { holder.objects.get().await }).await
}

/// 20 tenants cached, one `create` stuck: shutdown destroys the 20 and reports the stuck hook
/// when the stop deadline passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_destroys_every_cached_tenant_while_one_create_is_stuck() {
    let app = App::builder().stop_timeout(Duration::from_secs(2)).build().await.unwrap();
    let holder = app.get_object::<Holder>().unwrap();
    for i in 0..20 {
        read(&app, &holder, &format!("t{i}")).await.unwrap();
    }
    let (reader_app, reader) = (app.clone(), Arc::clone(&holder));
    drop(tokio::spawn(async move { read(&reader_app, &reader, "stuck").await }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stopped = app.shutdown().await;
    assert!(matches!(stopped, Err(DiError::StopTimeout { .. })), "{stopped:?}");
    assert_eq!(app.get_object::<Stuck>().unwrap().destroyed.load(Ordering::SeqCst), 20);
}

/// The destroy of an evicted tenant's object stuck: shutdown still destroys the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_destroys_every_cached_tenant_while_an_evicted_ones_destroy_is_stuck() {
    let app = App::builder().stop_timeout(Duration::from_secs(2)).build().await.unwrap();
    let holder = app.get_object::<Holder>().unwrap();
    read(&app, &holder, "evicted").await.unwrap();
    for i in 0..20 {
        read(&app, &holder, &format!("t{i}")).await.unwrap();
    }
    let objects = app.get_object::<Stuck>().unwrap();
    while objects.evicted.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stopped = app.shutdown().await;
    assert!(matches!(stopped, Err(DiError::StopTimeout { .. })), "{stopped:?}");
    assert_eq!(objects.destroyed.load(Ordering::SeqCst), 20);
}

/// A unit of work whose commit fails.
#[context_proto(complete = commit)]
#[derive(Default)]
pub struct FailingUnit;

impl FailingUnit {
    async fn commit(&self) -> Result<(), BoxError> {
        Err("the commit failed".into())
    }
}

/// Tenant objects built in a unit of work whose commit fails, counting their destroys.
#[singleton_proto]
pub struct Doomed {
    #[inject]
    unit: ContextRef<FailingUnit>,
    destroyed: AtomicUsize,
}

impl TenantObjects for Doomed {
    type Object = ();

    async fn create(&self, _: &Tenant) -> Result<(), BoxError> {
        self.unit.try_get()?;
        Ok(())
    }

    async fn destroy(&self, _: &Tenant, _: Arc<()>) -> Result<(), BoxError> {
        self.destroyed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[singleton_proto]
pub struct DoomedHolder {
    #[inject]
    objects: TenantRef<Doomed>,
}

/// A `create` whose scope's commit fails fails the read, and what it made is destroyed, not
/// dropped unseen.
#[tokio::test]
async fn a_create_whose_scope_fails_to_commit_fails_the_read_and_destroys_what_it_made() {
    let app = App::builder().build().await.unwrap();
    let holder = app.get_object::<DoomedHolder>().unwrap();
    let read = app.scope().tenant("acme").unwrap().run(async { holder.objects.get().await }).await;
    let error = read.expect_err("the build's commit failed");
    assert!(error.to_string().contains("the commit failed"), "{error}");
    assert_eq!(app.get_object::<Doomed>().unwrap().destroyed.load(Ordering::SeqCst), 1);
    app.shutdown().await.unwrap();
    assert_eq!(app.get_object::<Doomed>().unwrap().destroyed.load(Ordering::SeqCst), 1, "destroyed once");
}
