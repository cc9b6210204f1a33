//! One block declares `GET /` twice and has an unknown option: both are reported in one
//! compile.
use di_http::{http_controller, http_routes};

#[http_controller]
pub struct Pages;

#[http_routes(krate = di_http)]
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
    async fn about(&self) -> &'static str {
        "about"
    }
}

fn main() {}
