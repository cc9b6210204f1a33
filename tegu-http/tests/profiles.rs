//! A controller declared for a profile is served only under it; its routes need nothing else.
//! In a binary of its own: inventory registers these controllers for every App built in it.
#![allow(missing_docs, missing_debug_implementations)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tegu_core::App;
use tegu_http::{RouterBuilder, http_controller, http_routes};
use tower::ServiceExt;

#[http_controller(path = "/admin", profile = "admin")]
pub struct AdminController;

#[http_routes]
impl AdminController {
    #[get("/stats")]
    async fn stats(&self) -> &'static str {
        "stats"
    }
}

#[http_controller]
pub struct PublicController;

#[http_routes]
impl PublicController {
    #[get("/hello")]
    async fn hello(&self) -> &'static str {
        "hello"
    }
}

async fn status(router: &axum::Router, path: &str) -> StatusCode {
    router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap().status()
}

#[tokio::test]
async fn a_controller_of_another_profile_is_not_served() {
    let app = App::builder().build().await.unwrap();
    let router = RouterBuilder::new(&app).build().unwrap();
    assert_eq!(status(&router, "/hello").await, StatusCode::OK);
    assert_eq!(status(&router, "/admin/stats").await, StatusCode::NOT_FOUND);

    let app = App::builder().profile("admin").build().await.unwrap();
    let router = RouterBuilder::new(&app).build().unwrap();
    assert_eq!(status(&router, "/admin/stats").await, StatusCode::OK);
    assert_eq!(status(&router, "/hello").await, StatusCode::OK);
}
