//! `#[intercept]` on controller routes: the advice runs inside the request's scope, sees the
//! request through a `ContextRef<RequestHead>`, and may answer instead of the route.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Mutex;

use axum::http::StatusCode;
use tegu_core::{
    App, ContextRef,
    advice::{Advice, Call, Next},
    intercept, singleton_proto,
};
use tegu_http::{RequestHead, Server, http_controller, http_routes};

use tegu_test_support::http_client;

/// Records which request each call belonged to.
#[singleton_proto]
pub struct Audit {
    #[inject]
    head: ContextRef<RequestHead>,
    seen: Mutex<Vec<String>>,
}

impl<R> Advice<R> for Audit {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let head = self.head.get();
        let line = format!("{} {} {} {}", call.method(), head.method(), head.uri().path(), head.id());
        let out = next.run().await;
        self.seen.lock().unwrap().push(line);
        out
    }
}

/// Refuses requests without `x-token`, before the route runs.
#[singleton_proto]
pub struct TokenGuard {
    #[inject]
    head: ContextRef<RequestHead>,
}

impl<T> Advice<Result<T, StatusCode>> for TokenGuard {
    async fn around(&self, _: Call, next: Next<'_, Result<T, StatusCode>>) -> Result<T, StatusCode> {
        if self.head.get().headers().get("x-token").is_none() {
            return Err(StatusCode::UNAUTHORIZED);
        }
        next.run().await
    }
}

#[http_controller(path = "/todos")]
pub struct TodoController {
    ran: Mutex<usize>,
}

#[http_routes]
impl TodoController {
    #[get("/{id}")]
    #[intercept(Audit, TokenGuard)]
    async fn get(&self, axum::extract::Path(id): axum::extract::Path<u32>) -> Result<String, StatusCode> {
        *self.ran.lock().unwrap() += 1;
        Ok(format!("todo {id}"))
    }
}

#[tokio::test]
async fn advices_wrap_a_route_inside_its_request() {
    let app = App::builder().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(Server::new(app.clone(), tegu_http::router(&app)).run(listener));

    let ok = http_client::send(addr, "GET", "/todos/7", &[("x-token", "t"), ("x-request-id", "req-1")], b"").await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "todo 7"));
    let refused = http_client::send(addr, "GET", "/todos/8", &[("x-request-id", "req-2")], b"").await;
    assert_eq!(refused.status, 401);

    let controller = app.get_object::<TodoController>().unwrap();
    assert_eq!(*controller.ran.lock().unwrap(), 1, "the guard answered without running the route");
    let seen = app.get_object::<Audit>().unwrap().seen.lock().unwrap().clone();
    assert_eq!(seen, ["get GET /todos/7 req-1", "get GET /todos/8 req-2"]);
}
