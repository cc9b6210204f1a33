//! Routes that clash or overlap fail at start-up, naming both handlers. In a binary of its own:
//! inventory registers these controllers for every App built in it.
#![allow(missing_docs, missing_debug_implementations)]

use tegu_core::App;
use tegu_http::{RouteError, RouterBuilder, http_controller, http_routes};

#[http_controller(path = "/things")]
pub struct ThingController;

#[http_routes]
impl ThingController {
    #[get("/")]
    async fn list(&self) -> &'static str {
        "things"
    }

    #[get("/{id}")]
    async fn show(&self) -> &'static str {
        "thing"
    }
}

#[http_controller]
pub struct LegacyController;

#[http_routes]
impl LegacyController {
    /// Same method and path as `ThingController::list`.
    #[get("/things")]
    async fn things(&self) -> &'static str {
        "legacy things"
    }

    /// Same place as `ThingController::show`, another capture name.
    #[delete("/things/{name}")]
    async fn forget(&self) -> &'static str {
        "forgotten"
    }

    /// A different method on the same path is no clash.
    #[post("/things")]
    async fn create(&self) -> &'static str {
        "created"
    }
}

#[tokio::test]
async fn clashing_and_overlapping_routes_name_both_handlers() {
    let app = App::builder().build().await.unwrap();
    let err = RouterBuilder::new(&app).build().unwrap_err();
    let RouteError::Multiple(errors) = &err else { panic!("expected two errors, got {err}") };
    assert_eq!(errors.len(), 2, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(
            "route `GET /things` is declared twice: by `LegacyController::things` and by `ThingController::list`"
        ),
        "{message}"
    );
    assert!(
        message.contains("route `/things/{name}` of `LegacyController::forget` overlaps route `/things/{id}` of `ThingController::show`")
            || message.contains("route `/things/{id}` of `ThingController::show` overlaps route `/things/{name}` of `LegacyController::forget`"),
        "{message}"
    );
}

#[tokio::test]
#[should_panic(expected = "is declared twice: by `LegacyController::things` and by `ThingController::list`")]
async fn router_panics_with_the_same_message() {
    let app = App::builder().build().await.unwrap();
    let _ = tegu_http::router(&app);
}

#[tokio::test]
async fn an_app_without_the_controllers_serves_none_of_them() {
    let app = App::builder().without_inventory().build().await.unwrap();
    assert!(RouterBuilder::new(&app).build().is_ok());
}
