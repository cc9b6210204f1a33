//! Every route form and extractor shape compiles: shorthand and general attributes, sync and
//! async methods, several routes on one method, middleware by attribute, a body extractor last.
use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::{Json, response::IntoResponse};
use tegu_core::singleton_proto;
use tegu_http::{http_controller, http_routes};
use tower::layer::util::Identity;

#[singleton_proto]
pub struct Store;

#[http_controller(path = "/v1", name = "api")]
#[middleware(Identity::new())]
pub struct Api {
    #[inject]
    store: Arc<Store>,
}

#[derive(serde::Deserialize)]
pub struct Filter {
    pub q: Option<String>,
}

#[http_routes]
impl Api {
    #[get("/")]
    #[head("/")]
    fn index(&self) -> &'static str {
        let _ = &self.store;
        "index"
    }

    #[get("/items/{id}")]
    #[middleware(Identity::new())]
    async fn item(&self, Path(id): Path<u32>, Query(filter): Query<Filter>, headers: HeaderMap) -> impl IntoResponse {
        format!("{id} {:?} {}", filter.q, headers.len())
    }

    #[put("/items/{id}")]
    async fn put(&self, Path(_id): Path<u32>, Json(body): Json<Vec<u32>>) -> Result<Json<Vec<u32>>, StatusCode> {
        Ok(Json(body))
    }

    #[route("/items", method = "options")]
    #[patch("/items")]
    #[delete("/items")]
    async fn other(&self, body: String) -> String {
        body
    }

    /// `Self` in an argument type names the controller.
    #[get("/me")]
    async fn me(&self, same: Option<axum::Extension<Arc<Self>>>) -> &'static str {
        if same.is_some() { "extension" } else { "none" }
    }

    /// Not a route: left alone.
    pub fn helper(&self) -> u32 {
        1
    }
}

fn main() {}
