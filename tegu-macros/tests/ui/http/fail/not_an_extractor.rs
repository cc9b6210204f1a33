//! Every argument is an axum extractor; the return type is a response.
use tegu_http::{http_controller, http_routes};

pub struct Config;
pub struct NotAResponse;

#[http_controller]
pub struct Api;

#[http_routes]
impl Api {
    #[get("/a")]
    async fn config(&self, config: Config, id: axum::extract::Path<u32>) -> String {
        let _ = (config, id);
        String::new()
    }

    #[get("/b")]
    async fn answer(&self) -> NotAResponse {
        NotAResponse
    }
}

fn main() {}
