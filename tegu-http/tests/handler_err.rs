//! A route method that returns `Err` fails its request, whatever status the error answers
//! with: `Result<_, String>` answers 200, and its write must not commit nor its events go out.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{App, ContextRef, context_proto, events::EventBus, handlers, singleton_proto};
use tegu_http::{Server, http_controller, http_routes};

use tegu_test_support::http_client;

/// What a committed unit of work stored.
#[singleton_proto]
#[derive(Default)]
pub struct Store {
    rows: Mutex<Vec<String>>,
}

/// A request's writes, committed at the end of its scope unless it failed: what a transaction
/// does.
#[context_proto(complete = commit)]
pub struct UnitOfWork {
    #[inject]
    store: Arc<Store>,
    #[inject(skip)]
    pending: Mutex<Vec<String>>,
}

impl UnitOfWork {
    async fn commit(&self) {
        if !tegu_core::scope::scope_failed() {
            let pending = std::mem::take(&mut *self.pending.lock().unwrap());
            self.store.rows.lock().unwrap().extend(pending);
        }
    }
}

pub struct Saved;

#[singleton_proto]
#[derive(Default)]
pub struct Audit {
    saved: AtomicUsize,
}

#[handlers]
impl Audit {
    #[event_handler]
    async fn on_saved(&self, _: &Saved) {
        self.saved.fetch_add(1, Ordering::Relaxed);
    }
}

#[http_controller]
pub struct Notes {
    #[inject]
    work: ContextRef<UnitOfWork>,
    #[inject]
    events: Arc<EventBus>,
}

#[http_routes]
impl Notes {
    /// Writes and emits, then fails or not: the newcomer's first error type.
    #[post("/notes/{fail}")]
    async fn save(&self, axum::extract::Path(fail): axum::extract::Path<bool>) -> Result<&'static str, String> {
        self.work.get().pending.lock().unwrap().push("a note".into());
        self.events.emit(Saved);
        if fail { Err("the note is too long".into()) } else { Ok("saved") }
    }

    /// Writes, and answers with a plain value: the status decides (200: it commits).
    #[post("/plain")]
    async fn plain(&self) -> &'static str {
        self.work.get().pending.lock().unwrap().push("plain".into());
        "saved"
    }
}

#[tokio::test]
async fn an_err_answered_200_stores_nothing_and_dispatches_nothing() {
    let app = App::builder().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(Server::new(app.clone(), tegu_http::router(&app)).run(listener));

    let failed = http_client::send(addr, "POST", "/notes/true", &[], b"").await;
    assert_eq!(failed.status, 200, "axum answers `Err(String)` with 200");
    let saved = http_client::send(addr, "POST", "/notes/false", &[], b"").await;
    assert_eq!(saved.status, 200);
    let plain = http_client::send(addr, "POST", "/plain", &[], b"").await;
    assert_eq!(plain.status, 200);

    app.shutdown().await.unwrap(); // waits for the handlers
    let rows = app.get_object::<Store>().unwrap().rows.lock().unwrap().clone();
    assert_eq!(rows, ["a note", "plain"], "the failed request's write did not commit");
    assert_eq!(app.get_object::<Audit>().unwrap().saved.load(Ordering::Relaxed), 1, "only the saved note's event");
}
