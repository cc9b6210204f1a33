//! HTTP routes to list, replay and discard the outbox's dead letters, for the principals with
//! the role `admin` (tegu-http's [`require_role`]); never mounted by default.

use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tegu_http::auth::{Principal, require_role};

use crate::dead::DeadLetter;
use crate::outbox::{Outbox, Replayed};

/// The role the routes need.
pub const ADMIN_ROLE: &str = "admin";

/// The routes, to nest where the service keeps its operators' routes, behind tegu-http's
/// [`AuthLayer`](tegu_http::auth::AuthLayer) (without it, every request is answered 401):
///
/// | route | what it does |
/// | --- | --- |
/// | `GET /dead-letters?after=0&limit=100` | a page of them, oldest first (at most 1000) |
/// | `GET /dead-letters/{id}` | one, or 404 |
/// | `POST /dead-letters/{id}/replay` | [`Outbox::replay`]: `{"replayed":"handled"}`, `"republished"`, or `{"failed_again":[ids]}`; 404 if there is none; 409 with the reason if it cannot be replayed here; 500 if the store failed (logged, not shown) |
/// | `DELETE /dead-letters/{id}` | [`Outbox::discard`]: 204, or 404 |
///
/// A request without credentials is answered 401, one whose principal lacks the role `admin`
/// or acts for a tenant (the dead letters are every tenant's) 403, before the route runs. A dead letter is shown with its event's JSON (as JSON, or as text
/// if it is none): the operator needs it to mend the event. What the routes log names the user,
/// the dead letter and what was done, never an event's JSON nor its error.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use axum::{Router, body::Body, http::Request};
/// use tegu_core::App;
/// use tegu_http::auth::{AuthLayer, BearerTokens};
/// use tegu_outbox::Outbox;
/// use tegu_outbox::testing::{MemoryBroker, MemoryStore};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
/// let token = "0123456789abcdef0123456789abcdef";
/// let app = App::builder()
///     .register(store.proto())
///     .register(broker.proto())
///     .register(Outbox::proto())
///     .register(BearerTokens::proto())
///     .config_value("auth.tokens", [serde_json::json!({ "token": token, "user": "ops", "roles": ["admin"] })])
///     .build()
///     .await?;
/// let router = Router::new()
///     .nest("/admin", tegu_outbox::admin::routes(app.get_object::<Outbox>()?))
///     .layer(AuthLayer::new(&app)?);
/// let list = || Request::get("/admin/dead-letters");
/// let anonymous = router.clone().oneshot(list().body(Body::empty())?).await?;
/// assert_eq!(anonymous.status(), 401);
/// let ops = router.oneshot(list().header("authorization", format!("Bearer {token}")).body(Body::empty())?).await?;
/// assert_eq!(ops.status(), 200);
/// app.shutdown().await?;
/// # Ok(()) }
/// ```
pub fn routes(outbox: Arc<Outbox>) -> Router {
    Router::new()
        .route("/dead-letters", get(list))
        .route("/dead-letters/{id}", get(one).delete(discard))
        .route("/dead-letters/{id}/replay", post(replay))
        .layer(axum::middleware::from_fn(service_wide))
        .layer(require_role(ADMIN_ROLE))
        .with_state(outbox)
}

/// Refuses (403) a principal that acts for a tenant: the dead letters are every tenant's, and a
/// replay runs as the event's tenant.
async fn service_wide(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let tenant = request.extensions().get::<Principal>().and_then(Principal::tenant).is_some();
    if tenant {
        return (
            StatusCode::FORBIDDEN,
            "the dead letters are every tenant's: a principal of one tenant may not act on them",
        )
            .into_response();
    }
    next.run(request).await
}

/// A page's bounds.
#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    after: i64,
    #[serde(default = "Page::default_limit")]
    limit: u32,
}

impl Page {
    fn default_limit() -> u32 {
        100
    }
}

/// A dead letter as the routes show it.
fn shown(letter: &DeadLetter) -> Value {
    let payload = serde_json::from_slice::<Value>(&letter.payload)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&letter.payload).into_owned()));
    let headers: serde_json::Map<String, Value> =
        letter.headers.iter().map(|(name, value)| (name.clone(), Value::String(value.clone()))).collect();
    json!({
        "id": letter.id,
        "why": letter.why.kind(),
        "handler": letter.why.handler(),
        "event_id": letter.event_id,
        "name": letter.name,
        "payload": payload,
        "headers": headers,
        "error": letter.error,
        "attempts": letter.attempts,
        "at_ms": letter.at,
    })
}

/// A store that failed: 500, the error logged (it is the store's, not an event's).
fn failed(doing: &str, error: tegu_core::error::BoxError) -> Response {
    tracing::error!(%error, "{doing} failed");
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{doing} failed; see the service's log")).into_response()
}

async fn list(State(outbox): State<Arc<Outbox>>, Query(page): Query<Page>) -> Response {
    match outbox.dead_letters(page.after, page.limit.min(1000)).await {
        Ok(letters) => Json(letters.iter().map(shown).collect::<Vec<_>>()).into_response(),
        Err(error) => failed("reading the dead letters", error),
    }
}

async fn one(State(outbox): State<Arc<Outbox>>, Path(id): Path<i64>) -> Response {
    match outbox.dead_letter(id).await {
        Ok(Some(letter)) => Json(shown(&letter)).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no dead letter has this number").into_response(),
        Err(error) => failed("reading a dead letter", error),
    }
}

async fn replay(
    State(outbox): State<Arc<Outbox>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<i64>,
) -> Response {
    let replayed = outbox.replay(id).await;
    let what = match &replayed {
        Ok(Replayed::Refused(_)) => "refused".to_owned(),
        Ok(replayed) => format!("{replayed:?}"),
        Err(_) => "failed".to_owned(),
    };
    tracing::info!(user = principal.user(), dead_letter = id, outcome = %what, "a dead letter was replayed");
    match replayed {
        Ok(Replayed::Handled) => Json(json!({ "replayed": "handled" })).into_response(),
        Ok(Replayed::Republished) => Json(json!({ "replayed": "republished" })).into_response(),
        Ok(Replayed::FailedAgain(ids)) => Json(json!({ "failed_again": ids })).into_response(),
        Ok(Replayed::Refused(why)) => (StatusCode::CONFLICT, why).into_response(),
        Ok(Replayed::NotFound) => (StatusCode::NOT_FOUND, "no dead letter has this number").into_response(),
        Err(error) => failed("replaying a dead letter", error),
    }
}

async fn discard(
    State(outbox): State<Arc<Outbox>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<i64>,
) -> Response {
    match outbox.discard(id).await {
        Ok(true) => {
            tracing::info!(user = principal.user(), dead_letter = id, "a dead letter was discarded");
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => (StatusCode::NOT_FOUND, "no dead letter has this number").into_response(),
        Err(error) => failed("discarding a dead letter", error),
    }
}
