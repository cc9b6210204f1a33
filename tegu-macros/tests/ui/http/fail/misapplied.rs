//! `#[http_routes]` applies to an inherent, non-generic impl block with routes; route methods
//! are not generic and take extractor types; a controller's `#[middleware]` names a layer.
use tegu_http::{http_controller, http_routes};

#[http_controller]
#[middleware]
pub struct Pages;

#[http_routes]
impl Pages {
    #[get("/generic")]
    async fn generic<T>(&self) -> &'static str {
        "generic"
    }

    #[get("/impl")]
    async fn impl_arg(&self, _body: impl Send) -> &'static str {
        "impl"
    }
}

#[http_routes]
impl Pages {
    fn helper(&self) {}
}

pub trait Page {
    fn render(&self) -> String;
}

#[http_routes]
impl Page for Pages {
    fn render(&self) -> String {
        String::new()
    }
}

pub struct Wrapper<T>(T);

#[http_routes]
impl<T> Wrapper<T> {
    #[get("/")]
    async fn index(&self) -> &'static str {
        "index"
    }
}

#[http_routes]
pub struct NotAnImpl;

fn main() {}
