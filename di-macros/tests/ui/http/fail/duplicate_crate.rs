//! `crate = path` is given at most once.
use di_http::{http_controller, http_routes};

#[http_controller]
pub struct Pages;

#[http_routes(crate = di_http, crate = ::di_http)]
impl Pages {
    #[get("/")]
    async fn index(&self) -> &'static str {
        "index"
    }
}

fn main() {}
