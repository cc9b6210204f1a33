//! Route methods borrow the shared controller.
use tegu_http::{http_controller, http_routes};

#[http_controller]
pub struct Api;

#[http_routes]
impl Api {
    #[get("/a")]
    async fn by_value(self) -> &'static str {
        "a"
    }

    #[get("/b")]
    async fn mutable(&mut self) -> &'static str {
        "b"
    }

    #[get("/c")]
    async fn no_self() -> &'static str {
        "c"
    }
}

fn main() {}
