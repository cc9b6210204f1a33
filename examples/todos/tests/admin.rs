//! The example's operators' routes: the outbox's dead letters under `/admin`, mounted only with
//! NATS and an operator's token (`TODOS_ADMIN_TOKEN`), answering 401 without the token and 200
//! with it. NATS is the server the tests start (`DI_TEST_NATS_URL`, or one of their own), else
//! the test is skipped with the reason printed.

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

const TOKEN: &str = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_letters_are_behind_the_operator_s_token() {
    let db = tegu_test_support::fresh_sqlite("todos-admin");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    // Without NATS nor a token: nothing mounted.
    let plain = todos::builder().config_value("db.url", &url).build().await.unwrap();
    assert!(todos::admin_routes(&plain).is_none());
    plain.shutdown().await.unwrap();

    let nats = match tegu_test_support::servers::nats() {
        Ok(nats) => nats,
        Err(why) => return tegu_test_support::servers::skip("the_dead_letters_are_behind_the_operator_s_token", why),
    };
    let stream = format!("TODOS_ADMIN_{}", std::process::id());
    let app = todos::with_admin(todos::with_nats(todos::builder()), TOKEN)
        .config_value("db.url", &url)
        .config_value("nats.url", nats)
        .config_value("nats.stream", &stream)
        .config_value("nats.subjects", stream.to_lowercase())
        .build()
        .await
        .unwrap();
    let admin = todos::admin_routes(&app).expect("mounted with NATS and a token");
    let send = |token: Option<&str>| {
        let mut request = Request::get("/admin/dead-letters");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        admin.clone().oneshot(request.body(Body::empty()).unwrap())
    };
    assert_eq!(send(None).await.unwrap().status(), 401);
    assert_eq!(send(Some("ffffffffffffffffffffffffffffffff")).await.unwrap().status(), 401);
    let listed = send(Some(TOKEN)).await.unwrap();
    assert_eq!(listed.status(), 200);
    let body = axum::body::to_bytes(listed.into_body(), 1 << 20).await.unwrap();
    assert_eq!(&body[..], b"[]");
    app.shutdown().await.unwrap();
    tegu_test_support::remove_sqlite(&db);
}
