//! Who the caller is: the authenticator's principal reaches the request's scope (its tenant as
//! the scope's tenant, through `TenantFrom::extension`), never one a client names: a tenant
//! header is not read, and a request with refused credentials is answered 401 before any
//! route runs.

#![allow(missing_docs, missing_debug_implementations)]

use axum::body::{Body, to_bytes};
use axum::http::Request;
use tegu_core::lineage::Tenant;
use tegu_core::{App, ContextRef};
use tegu_http::auth::{AuthLayer, BearerTokens, Principal};
use tegu_http::{RequestHead, RouterBuilder, TenantFrom, http_controller, http_routes};
use tower::ServiceExt;

const ACME: &str = "acme0000acme0000acme0000acme0000";

#[http_controller]
pub struct WhoAmI {
    #[inject]
    head: ContextRef<RequestHead>,
    #[inject]
    tenant: ContextRef<Tenant>,
}

#[http_routes]
impl WhoAmI {
    #[get("/whoami")]
    async fn get(&self) -> String {
        let head = self.head.get();
        let user = head.extensions().get::<Principal>().map_or("anonymous", Principal::user).to_owned();
        let tenant = self.tenant.try_get().map(|t| t.key().to_owned()).unwrap_or_else(|_| "none".to_owned());
        format!("{user}@{tenant}")
    }
}

async fn send(router: &axum::Router, request: axum::http::request::Builder) -> (u16, String) {
    let response = router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    (status, String::from_utf8(to_bytes(response.into_body(), 1 << 16).await.unwrap().to_vec()).unwrap())
}

#[tokio::test]
async fn the_principal_and_its_tenant_come_from_the_credentials_alone() {
    let tokens = serde_json::json!([{ "token": ACME, "user": "ada", "tenant": "acme" }]);
    let app = App::builder()
        .lineage::<Tenant>()
        .register(BearerTokens::proto())
        .config_value("auth.tokens", tokens)
        .build()
        .await
        .unwrap();
    let router = RouterBuilder::new(&app)
        .capture_extensions(true)
        .tenant(TenantFrom::extension().optional())
        .build()
        .unwrap()
        .layer(AuthLayer::new(&app).unwrap());
    let bearer = format!("Bearer {ACME}");

    let (status, body) = send(&router, Request::get("/whoami").header("authorization", &bearer)).await;
    assert_eq!((status, body.as_str()), (200, "ada@acme"));
    // A tenant the client names is not read: the principal's is the scope's.
    let request = Request::get("/whoami").header("authorization", &bearer).header("tegu-tenant", "globex");
    assert_eq!(send(&router, request).await, (200, "ada@acme".to_owned()));
    let (status, body) = send(&router, Request::get("/whoami").header("tegu-tenant", "globex")).await;
    assert_eq!((status, body.as_str()), (200, "anonymous@none"));
    // Refused credentials never reach the route.
    let (status, body) = send(&router, Request::get("/whoami").header("authorization", "Bearer nope")).await;
    assert_eq!((status, body.as_str()), (401, "the bearer token is refused"));
    // Another scheme is no bearer token: no principal, as without the header.
    let basic = Request::get("/whoami").header("authorization", "Basic YWRhOmFkYQ==");
    assert_eq!(send(&router, basic).await, (200, "anonymous@none".to_owned()));
    let twice = Request::get("/whoami").header("authorization", &bearer).header("authorization", &bearer);
    assert_eq!(send(&router, twice).await.0, 401);
    app.shutdown().await.unwrap();
}
