//! `#[http_routes]` needs the struct to be a controller.
use tegu_http::http_routes;

pub struct NotAController;

#[http_routes]
impl NotAController {
    #[get("/")]
    async fn index(&self) -> &'static str {
        "hi"
    }
}

fn main() {}
