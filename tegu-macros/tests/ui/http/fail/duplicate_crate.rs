//! `crate = path` is given at most once.
use tegu_http::{http_controller, http_routes};

#[http_controller]
pub struct Pages;

#[http_routes(crate = tegu_http, crate = ::tegu_http)]
impl Pages {
    #[get("/")]
    async fn index(&self) -> &'static str {
        "index"
    }
}

fn main() {}
