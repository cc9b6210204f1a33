//! One block declares `GET /` twice, `GET /about` twice on one method, and has two unknown
//! options: each is reported, in one compile.
use tegu_http::{http_controller, http_routes};

#[http_controller]
pub struct Pages;

#[http_routes(krate = tegu_http, tracing(level = "debug"))]
impl Pages {
    #[get("/")]
    async fn index(&self) -> &'static str {
        "index"
    }

    #[route("/", method = "get")]
    async fn home(&self) -> &'static str {
        "home"
    }

    #[get("/about")]
    #[post("/about")]
    #[get("/about")]
    async fn about(&self) -> &'static str {
        "about"
    }
}

fn main() {}
