//! The dead letters' admin routes behind tegu-http's authenticator: 401 without credentials or
//! with a token that is refused, 403 for a principal without the role `admin`; for an admin,
//! the list, one dead letter, a replay and a discard. Nothing they log shows an event's JSON
//! nor a token.

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{Request, Response};
use tegu_core::App;
use tegu_http::auth::{AuthLayer, BearerTokens};
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{DeadLetter, Outbox, OutboxStore, Why};
use tower::ServiceExt;

const ADMIN: &str = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0";
const VIEWER: &str = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1";
const TENANT_ADMIN: &str = "d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3";
const SECRET: &str = "card-4242-4242-4242-4242";

async fn app(store: &MemoryStore, broker: &MemoryBroker) -> (App, Router) {
    let tokens = serde_json::json!([
        { "token": ADMIN, "user": "ops", "roles": ["admin"] },
        { "token": VIEWER, "user": "viewer", "roles": ["read"], "tenant": "acme" },
        { "token": TENANT_ADMIN, "user": "acme-admin", "roles": ["admin"], "tenant": "acme" },
    ]);
    let app = App::builder()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .register(BearerTokens::proto())
        .config_value("auth.tokens", tokens)
        .build()
        .await
        .unwrap();
    let router = Router::new()
        .nest("/admin", tegu_outbox::admin::routes(app.get_object::<Outbox>().unwrap()))
        .layer(AuthLayer::new(&app).unwrap());
    (app, router)
}

async fn send(router: &Router, method: &str, uri: &str, token: Option<&str>) -> (u16, Response<Body>) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    (response.status().as_u16(), response)
}

async fn body(response: Response<Body>) -> String {
    String::from_utf8(to_bytes(response.into_body(), 1 << 20).await.unwrap().to_vec()).unwrap()
}

/// A dead letter of an event of no type this instance knows, carrying `SECRET`.
async fn dead(store: &MemoryStore) -> i64 {
    let payload = format!(r#"{{"card":"{SECRET}"}}"#).into_bytes();
    let mut letter = DeadLetter::new(Why::Unknown, "e1", "cards.charged", payload, Vec::new());
    letter.error = "no event type of this instance is named \"cards.charged\"".into();
    store.dead_letter(&letter).await.unwrap()
}

#[test]
fn the_routes_refuse_whom_they_must_and_serve_an_admin_without_logging_a_payload() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
            let (app, router) = app(&store, &broker).await;
            let id = dead(&store).await;

            let (status, response) = send(&router, "GET", "/admin/dead-letters", None).await;
            assert_eq!(status, 401);
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
            let (status, response) =
                send(&router, "GET", "/admin/dead-letters", Some("c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2")).await;
            assert_eq!(status, 401);
            assert_eq!(body(response).await, "the bearer token is refused");
            let (status, response) = send(&router, "GET", "/admin/dead-letters", Some(VIEWER)).await;
            assert_eq!((status, body(response).await.as_str()), (403, "this route needs the role `admin`"));
            let (status, _) = send(&router, "POST", &format!("/admin/dead-letters/{id}/replay"), Some(VIEWER)).await;
            assert_eq!(status, 403);
            // An admin of one tenant: the dead letters are every tenant's.
            let (status, response) = send(&router, "GET", "/admin/dead-letters", Some(TENANT_ADMIN)).await;
            assert_eq!(status, 403);
            assert!(body(response).await.contains("every tenant's"));
            let (status, _) = send(&router, "DELETE", &format!("/admin/dead-letters/{id}"), None).await;
            assert_eq!(status, 401);
            assert_eq!(store.dead().len(), 1, "nothing done for those refused");

            let (status, response) = send(&router, "GET", "/admin/dead-letters?limit=10", Some(ADMIN)).await;
            assert_eq!(status, 200);
            let list: serde_json::Value = serde_json::from_str(&body(response).await).unwrap();
            assert_eq!(list[0]["id"], id);
            assert_eq!(list[0]["why"], "unknown");
            assert_eq!(list[0]["payload"]["card"], SECRET, "an admin sees the event to mend it");
            let (status, _) = send(&router, "GET", &format!("/admin/dead-letters/{id}"), Some(ADMIN)).await;
            assert_eq!(status, 200);
            // Still of an unknown type here: refused, and kept.
            let (status, response) =
                send(&router, "POST", &format!("/admin/dead-letters/{id}/replay"), Some(ADMIN)).await;
            assert_eq!(status, 409);
            assert!(body(response).await.contains("cards.charged"));
            let (status, _) = send(&router, "DELETE", &format!("/admin/dead-letters/{id}"), Some(ADMIN)).await;
            assert_eq!(status, 204);
            let (status, _) = send(&router, "DELETE", &format!("/admin/dead-letters/{id}"), Some(ADMIN)).await;
            assert_eq!(status, 404);
            let (status, _) = send(&router, "POST", "/admin/dead-letters/99/replay", Some(ADMIN)).await;
            assert_eq!(status, 404);
            app.shutdown().await.unwrap();
        });
    });
    assert!(logs.contains("a dead letter was discarded") && logs.contains("user=\"ops\""), "{logs}");
    assert!(logs.contains("credentials are refused"), "{logs}");
    for secret in [SECRET, ADMIN, VIEWER, TENANT_ADMIN, "c2c2c2c2"] {
        assert!(!logs.contains(secret), "the logs show {secret}:\n{logs}");
    }
}

#[tokio::test]
async fn bearer_tokens_refuse_short_and_repeated_tokens_at_build_naming_the_entry_not_the_token() {
    for (tokens, why) in [
        (serde_json::json!([{ "token": "short", "user": "ops" }]), "at least 32 characters"),
        (
            serde_json::json!([{ "token": ADMIN, "user": "ops" }, { "token": ADMIN, "user": "other" }]),
            "another entry's too",
        ),
        (serde_json::json!([{ "token": ADMIN, "user": "ops", "tenant": "a b" }]), "auth.tokens[0]"),
    ] {
        let error = App::builder()
            .register(BearerTokens::proto())
            .config_value("auth.tokens", tokens)
            .build()
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(why), "{error}");
        assert!(!error.contains(ADMIN) && !error.contains("short\""), "{error}");
    }
}
