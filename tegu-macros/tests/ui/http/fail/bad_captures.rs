//! Captures are whole segments with a name; a catch-all ends the whole path.
use tegu_http::{http_controller, http_routes};

#[http_controller(path = "/files/{*rest}")]
pub struct Files;

#[http_routes]
impl Files {
    #[get("/{}")]
    async fn unnamed(&self) -> &'static str {
        "unnamed"
    }

    #[get("/v{version}")]
    async fn partial(&self) -> &'static str {
        "partial"
    }

    #[get("/{*rest}/meta")]
    async fn not_last(&self) -> &'static str {
        "not last"
    }
}

fn main() {}
