//! The general form names a known method; options are the documented ones.
use tegu_http::{http_controller, http_routes};

#[http_controller(prefix = "/api")]
pub struct Api;

#[http_routes]
impl Api {
    #[route("/a", method = "FETCH")]
    async fn a(&self) -> &'static str {
        "a"
    }

    #[get]
    async fn b(&self) -> &'static str {
        "b"
    }

    #[middleware(tower::layer::util::Identity::new())]
    async fn c(&self) -> &'static str {
        "c"
    }
}

fn main() {}
