//! A tenant's work is never run as another's: a `before_commit` handler of an event emitted in
//! a scope of another tenant than the one committing it refuses the commit; a job started in a
//! scope of another App carries none of its lineage. (Apart from `lineage.rs`, whose tests read
//! log lines that other tests' handlers on other threads would race with.)

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Mutex;

use tegu_core::lineage::Tenant;
use tegu_core::{App, ContextRef, DiError, handlers, singleton_proto};

pub struct Completed;

#[singleton_proto]
pub struct Seen {
    #[inject]
    tenant: ContextRef<Tenant>,
    lines: Mutex<Vec<String>>,
}

impl Seen {
    fn note(&self, what: &str) {
        let tenant = match self.tenant.try_get() {
            Ok(tenant) => tenant.key().to_owned(),
            Err(DiError::NoTenant { .. }) => "no tenant".to_owned(),
            Err(e) => format!("{e}"),
        };
        self.lines.lock().unwrap().push(format!("{what}: {tenant}"));
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
    App::builder().lineage::<Tenant>().without_schedules().build().await.unwrap()
}

/// A unit of work of tenant acme's scope (what tegu-tx's transaction is: an `EventHold`) holds
/// an event emitted in a scope of globex opened inside it: its `before_commit` handler would run
/// in acme's scope, reading and writing as acme, so the unit's commit is refused and the event
/// goes to its `after_rollback` handler as globex's. One emitted in a scope of acme's own is not.
#[tokio::test]
async fn a_before_commit_handler_never_runs_as_another_tenant_than_the_emitter() {
    let app = app().await;
    let seen = app.get_object::<Seen>().unwrap();
    let prepared = |inner: &'static str| {
        let app = app.clone();
        async move {
            app.scope()
                .tenant("acme")
                .unwrap()
                .run(async {
                    let hold = tegu_core::events::EventHold::new();
                    hold.run(app.scope().tenant(inner).unwrap().run(async { app.events().emit(Completed) })).await;
                    let prepared = hold.prepare().await;
                    hold.release(prepared.is_ok());
                    prepared
                })
                .await
        }
    };
    let refused = prepared("globex").await.expect_err("a handler of globex's event in acme's commit");
    let message = refused.to_string();
    assert!(message.contains("Seen::before") && message.contains("another tenant"), "{message}");
    assert!(!message.contains("globex") && !message.contains("acme"), "no key in the error: {message}");
    prepared("acme").await.unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(seen.lines(), ["after_commit: acme", "after_rollback: globex", "before_commit: acme"]);
}

/// A job of one App started in a scope of another carries none of that scope's lineage, as an
/// event emitted there does not.
#[tokio::test]
async fn a_job_started_in_another_apps_scope_carries_none_of_its_lineage() {
    let (one, two) = (app().await, app().await);
    let seen = two.get_object::<Seen>().unwrap();
    one.scope().tenant("acme").unwrap().run(async { two.run_schedule::<Seen>("job").await.unwrap() }).await;
    two.shutdown().await.unwrap();
    assert_eq!(seen.lines(), ["job: no tenant"]);
}
