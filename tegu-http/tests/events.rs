//! The events of a request: dispatched once it has answered well, to the `after_rollback`
//! handlers when it answers a 4xx or 5xx status; a `before_commit` handler that fails turns the
//! answer into a 500.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use tegu_core::{App, events::EventBus, handlers, singleton_proto};
use tegu_http::{Server, http_controller, http_routes};

use tegu_test_support::http_client;

pub struct Ordered;

#[singleton_proto]
#[derive(Default)]
pub struct Orders {
    seen: AtomicUsize,
    checked: AtomicUsize,
    rolled_back: AtomicUsize,
}

#[handlers]
impl Orders {
    #[event_handler]
    async fn on_ordered(&self, _: &Ordered) {
        self.seen.fetch_add(1, Ordering::Relaxed);
    }

    /// The fourth order it is asked to check fails the request.
    #[event_handler(before_commit)]
    async fn check(&self, _: &Ordered) -> Result<(), String> {
        match self.checked.fetch_add(1, Ordering::Relaxed) {
            3 => Err("the stock check failed".into()),
            _ => Ok(()),
        }
    }

    #[event_handler(after_rollback)]
    async fn on_rolled_back(&self, _: &Ordered) {
        self.rolled_back.fetch_add(1, Ordering::Relaxed);
    }
}

#[http_controller]
pub struct OrderController {
    #[inject]
    events: Arc<EventBus>,
}

#[http_routes]
impl OrderController {
    /// Emits, then answers with the status asked for.
    #[post("/order/{status}")]
    async fn order(&self, axum::extract::Path(status): axum::extract::Path<u16>) -> StatusCode {
        self.events.emit(Ordered);
        StatusCode::from_u16(status).unwrap()
    }
}

#[tokio::test]
async fn a_request_answered_with_an_error_rolls_its_events_back() {
    let app = App::builder().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(Server::new(app.clone(), tegu_http::router(&app)).run(listener));
    // The before_commit check runs for the answers without an error status only: the fourth
    // (the second 200) fails, and is answered 500.
    for (status, answered) in [("201", "201"), ("409", "409"), ("500", "500"), ("204", "204"), ("200", "200")] {
        let reply = http_client::send(addr, "POST", &format!("/order/{status}"), &[], b"").await;
        assert_eq!(reply.status.to_string(), answered);
    }
    for (status, answered) in [("200", "500"), ("404", "404"), ("202", "202")] {
        let reply = http_client::send(addr, "POST", &format!("/order/{status}"), &[], b"").await;
        assert_eq!(reply.status.to_string(), answered, "POST /order/{status}");
    }
    app.shutdown().await.unwrap(); // waits for the handlers
    let orders = app.get_object::<Orders>().unwrap();
    assert_eq!(orders.seen.load(Ordering::Relaxed), 4, "the 201, 204, first 200 and 202");
    assert_eq!(orders.checked.load(Ordering::Relaxed), 5, "each answer without an error status");
    assert_eq!(orders.rolled_back.load(Ordering::Relaxed), 4, "the 409, 500, failed 200 and 404");
}
