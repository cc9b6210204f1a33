//! A `before_commit` handler sees its emitter's lineage: an event emitted in a scope of another
//! user, opened inside a unit of work of the request (a `#[transactional]` method's
//! transaction is an `EventHold`), is prepared with that user, its trace and its request, as
//! its `after_commit` handler is; and the handler runs in a span of its own.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Mutex;

use tegu_core::error::BoxError;
use tegu_core::events::EventHold;
use tegu_core::lineage::{Lineage, Tenant, Travels};
use tegu_core::{App, ContextRef, handlers, lineage_type, singleton_proto};

/// Who the scope acts for.
#[derive(Debug, PartialEq)]
pub struct User(String);

impl Travels for User {
    const HEADER: &'static str = "x-user";

    fn encode(&self) -> String {
        self.0.clone()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(User(value.to_owned()))
    }
}

lineage_type!(User);

pub struct Paid;

#[singleton_proto]
pub struct Ledger {
    #[inject]
    user: ContextRef<User>,
    #[inject]
    tenant: ContextRef<Tenant>,
    lines: Mutex<Vec<String>>,
}

impl Ledger {
    fn note(&self, phase: &str) {
        let user = self.user.try_get().map_or_else(|e| e.to_string(), |u| u.0.clone());
        let tenant = self.tenant.try_get().map_or_else(|e| e.to_string(), |t| t.key().to_owned());
        tracing::info!(phase, "ledger entry");
        self.lines.lock().unwrap().push(format!("{phase}: {user} of {tenant}"));
    }
}

#[handlers]
impl Ledger {
    #[event_handler(before_commit)]
    async fn before(&self, _: &Paid) {
        self.note("before_commit");
    }

    #[event_handler]
    async fn after(&self, _: &Paid) {
        self.note("after_commit");
    }
}

#[test]
fn a_before_commit_handler_sees_the_user_of_the_scope_that_emitted_its_event() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = App::builder().lineage::<Tenant>().lineage::<User>().build().await.unwrap();
            let ledger = app.get_object::<Ledger>().unwrap();
            let request = app.scope().tenant("acme").unwrap().with(User("ada".into())).unwrap();
            request
                .run(async {
                    // The request's unit of work, holding an event emitted as bob.
                    let hold = EventHold::new();
                    let as_bob = app.scope().lineage(&Lineage::current()).with(User("bob".into())).unwrap();
                    hold.run(as_bob.run(async { app.events().emit(Paid) })).await;
                    hold.prepare().await.unwrap();
                    hold.release(true);
                })
                .await;
            app.shutdown().await.unwrap();
            let mut lines = ledger.lines.lock().unwrap().clone();
            lines.sort();
            assert_eq!(lines, ["after_commit: bob of acme", "before_commit: bob of acme"]);
        });
    });
    let entry = logs.lines().find(|l| l.contains("ledger entry") && l.contains("before_commit")).unwrap_or_default();
    assert!(entry.contains("event handler{"), "the before_commit handler's line has no span: {logs}");
    assert!(entry.contains("tenant=\"acme\""), "{entry}");
}
