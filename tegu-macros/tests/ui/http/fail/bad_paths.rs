//! Paths are checked where they are written.
use tegu_http::{http_controller, http_routes};

#[http_controller(path = "api")]
pub struct Api;

#[http_routes]
impl Api {
    #[get("users/{id}")]
    async fn user(&self) -> &'static str {
        "user"
    }

    #[get("/users/:id/todos")]
    async fn todos(&self) -> &'static str {
        "todos"
    }

    #[post("/users/{id")]
    async fn create(&self) -> &'static str {
        "created"
    }
}

fn main() {}
