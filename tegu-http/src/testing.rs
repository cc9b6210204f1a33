//! Testing services and controllers: a guide.
//!
//! The seams are on `tegu_core`'s builder and App (`override_provider`, `root`, `config_value`,
//! `App::scope`, `get_object_async`; the README's "Tests" section lists them all); this page
//! puts them together on a controller:
//!
//! 1. a **fake by trait**: the real mailer is replaced for every consumer with
//!    `override_provider::<dyn Mailer>`;
//! 2. a **seeded user**: the controller's method runs in a scope that starts with the
//!    `CurrentUser` the test chose (`app.scope().with(user)?.run(..)`), no request needed;
//! 3. an **HTTP request through the router**, in-process, with `tower::ServiceExt::oneshot`:
//!    every layer of a real request (the scope, the request head, the completion phase) and no
//!    socket;
//! 4. **roots**: the App builds only what the controller reaches.
//!
//! ```rust,standalone_crate
//! use std::sync::{Arc, Mutex};
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use tegu_core::{context_proto, singleton_proto, App, ContextRef};
//! use tegu_http::{RequestHead, http_controller, http_routes};
//! use tower::ServiceExt; // `oneshot`
//!
//! pub trait Mailer: Send + Sync {
//!     fn send(&self, to: &str, text: &str);
//! }
//!
//! /// The real one: talks to an SMTP server.
//! #[singleton_proto(provides(dyn Mailer))]
//! pub struct Smtp;
//! impl Mailer for Smtp {
//!     fn send(&self, _: &str, _: &str) { unreachable!("tests send no mail") }
//! }
//!
//! /// Per request: who is asking (here from a header; a real one would check a token).
//! #[context_proto]
//! pub struct CurrentUser {
//!     #[inject]
//!     head: Arc<RequestHead>,
//! }
//! impl CurrentUser {
//!     fn name(&self) -> String {
//!         self.head.headers().get("x-user").and_then(|v| v.to_str().ok()).unwrap_or("anonymous").to_owned()
//!     }
//! }
//!
//! #[http_controller(path = "/invites")]
//! pub struct InviteController {
//!     #[inject]
//!     mailer: Arc<dyn Mailer>,
//!     #[inject]
//!     user: ContextRef<CurrentUser>,
//! }
//!
//! #[http_routes]
//! impl InviteController {
//!     #[post("/{friend}")]
//!     async fn invite(&self, axum::extract::Path(friend): axum::extract::Path<String>) -> StatusCode {
//!         self.mailer.send(&friend, &format!("{} invites you", self.user.get().name()));
//!         StatusCode::ACCEPTED
//!     }
//! }
//!
//! /// Records instead of sending.
//! #[derive(Default)]
//! struct FakeMailer { sent: Mutex<Vec<(String, String)>> }
//! impl Mailer for FakeMailer {
//!     fn send(&self, to: &str, text: &str) { self.sent.lock().unwrap().push((to.into(), text.into())) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mailer = Arc::new(FakeMailer::default());
//! let app = App::builder()
//!     .override_provider::<dyn Mailer>(mailer.clone()) // 1.
//!     .root::<InviteController>()                      // 4.
//!     .build()
//!     .await?;
//!
//! // 2. The method, in a scope given its user: here a `CurrentUser` built from a request head.
//! let controller = app.get_object::<InviteController>()?;
//! let head = RequestHead::from_request(&Request::post("/").header("x-user", "ada").body(())?);
//! let status = app.scope().with(head)?
//!     .run(controller.invite(axum::extract::Path("bob".to_owned())))
//!     .await;
//! assert_eq!(status, StatusCode::ACCEPTED);
//!
//! // 3. The whole request, through the router.
//! let request = Request::post("/invites/cy").header("x-user", "dee").body(Body::empty())?;
//! let response = tegu_http::router(&app).oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::ACCEPTED);
//!
//! assert_eq!(
//!     *mailer.sent.lock().unwrap(),
//!     [("bob".to_owned(), "ada invites you".to_owned()), ("cy".to_owned(), "dee invites you".to_owned())]
//! );
//! # Ok(()) }
//! ```
