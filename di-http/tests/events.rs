//! The events of a request: dispatched once it has answered well, dropped when it answers a
//! 4xx or 5xx status.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use di_core::{App, EventBus, handlers, singleton_proto};
use di_http::{Server, http_controller, http_routes};

use di_test_support::http_client;

pub struct Ordered;

#[singleton_proto]
#[derive(Default)]
pub struct Orders {
    seen: AtomicUsize,
}

#[handlers]
impl Orders {
    #[event_handler]
    async fn on_ordered(&self, _: &Ordered) {
        self.seen.fetch_add(1, Ordering::Relaxed);
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
async fn a_request_answered_with_an_error_drops_its_events() {
    let app = App::builder().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(Server::new(app.clone(), di_http::router(&app)).run(listener));
    for status in ["201", "409", "500", "204", "404"] {
        let reply = http_client::send(addr, "POST", &format!("/order/{status}"), &[], b"").await;
        assert_eq!(reply.status.to_string(), status);
    }
    app.shutdown().await.unwrap(); // waits for the handlers
    assert_eq!(app.get_object::<Orders>().unwrap().seen.load(Ordering::Relaxed), 2, "only the 201 and the 204");
}
