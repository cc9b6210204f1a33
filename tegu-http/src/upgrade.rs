//! Context scopes for an upgraded connection (a WebSocket), which outlives the request that
//! opened it: [`ConnectionScope`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tegu_core::futures::ContextFuture;
use tegu_core::{
    App, DiError,
    scope::{AppHold, ContextSlot},
};

use crate::head::RequestHead;

/// What an upgraded connection needs to run in context scopes of its own: the App and the head
/// of the request that upgraded it. Take it in the handler (inside the request's scope), move it
/// into the upgrade's callback, and [`run`](Self::run) the connection's work in it: once for the
/// whole connection (one scope: its objects live as long as the socket), or once per message
/// (a scope per message: objects, completion and destroy hooks per message, as a request).
///
/// Each scope it opens is given the upgrade request's [`RequestHead`] (its headers, its id, the
/// 101 status), so that the objects built in it see who connected. While it exists it holds the
/// App ([`App::hold`]): `App::shutdown` waits for it (within its deadline) before destroying
/// any singleton. [`Server`](crate::Server) counts the upgraded socket itself among the
/// connections it drains: a graceful shutdown waits for it up to its deadline, then cuts it
/// (reads and writes fail), before the App shuts down.
///
/// # Examples
///
/// See the guide's WebSocket section (`docs/guide/http.md`) for a served echo over a real
/// socket; here, the scopes alone:
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, ProtoDef};
/// use tegu_http::{ConnectionScope, RequestHead};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = App::builder().build().await?;
/// let request = http::Request::get("/ws").header("x-request-id", "ws-1").body(())?;
/// // In the handler, inside the request's scope:
/// let scope = app.scope().with(RequestHead::from_request(&request))?
///     .run(async { ConnectionScope::current() })
///     .await?;
/// // Later, in the upgrade's task, outside any request: a scope per message.
/// for message in ["hello", "bye"] {
///     let seen = scope.run(async move {
///         let head = tegu_core::App::current().unwrap().get_object::<RequestHead>().unwrap();
///         format!("{} got {message}", head.id())
///     }).await;
///     assert_eq!(seen, format!("ws-1 got {message}"));
/// }
/// # Ok(()) }
/// ```
pub struct ConnectionScope {
    app: App,
    head: Arc<RequestHead>,
    slot: ContextSlot<RequestHead>,
    _hold: Option<AppHold>,
}

impl ConnectionScope {
    /// The current request's App and head, for its upgraded connection.
    ///
    /// # Errors
    ///
    /// [`DiError::NoScope`] outside a request's scope (its head is what the connection's scopes
    /// are given).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::{ConnectionScope, RequestHead};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert!(ConnectionScope::current().is_err()); // no request here
    /// let request = http::Request::get("/ws").header("x-request-id", "ws-1").body(())?;
    /// let scope = app.scope().with(RequestHead::from_request(&request))?.run(async { ConnectionScope::current() }).await?;
    /// assert_eq!(scope.head().id().to_string(), "ws-1");
    /// # Ok(()) }
    /// ```
    pub fn current() -> Result<ConnectionScope, DiError> {
        let wanted = core::any::type_name::<ConnectionScope>();
        let app = App::current().ok_or(DiError::NoScope { wanted })?;
        let head = app.get_object::<RequestHead>()?;
        let slot = app.context_slot::<RequestHead>()?;
        let hold = app.hold();
        Ok(ConnectionScope { app, head, slot, _hold: hold })
    }

    /// Runs `fut` in a new context scope of the App, given the upgrade request's head; the
    /// scope ends as [`App::run_in_context`] describes (completion hooks when `fut` returns,
    /// then destroy hooks).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::{ConnectionScope, RequestHead};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let request = http::Request::get("/ws").body(())?;
    /// let scope = app.scope().with(RequestHead::from_request(&request))?.run(async { ConnectionScope::current() }).await?;
    /// // Later, outside any request: a scope of the App, given the upgrade request's head.
    /// let path = scope.run(async {
    ///     let head = tegu_core::App::current().unwrap().get_object::<RequestHead>().unwrap();
    ///     head.uri().path().to_owned()
    /// }).await;
    /// assert_eq!(path, "/ws");
    /// # Ok(()) }
    /// ```
    pub fn run<F: Future>(&self, fut: F) -> ContextFuture<F> {
        self.app.run_in_context_with(self.slot, Arc::clone(&self.head), fut)
    }

    /// The head of the request that upgraded the connection.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::{ConnectionScope, RequestHead};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let request = http::Request::get("/chat").header("x-user", "ada").body(())?;
    /// let scope = app.scope().with(RequestHead::from_request(&request))?.run(async { ConnectionScope::current() }).await?;
    /// assert_eq!(scope.head().headers()["x-user"], "ada");
    /// # Ok(()) }
    /// ```
    pub fn head(&self) -> &RequestHead {
        &self.head
    }

    /// The App whose scopes [`run`](Self::run) opens.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::{ConnectionScope, RequestHead};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let request = http::Request::get("/chat").body(())?;
    /// let scope = app.scope().with(RequestHead::from_request(&request))?.run(async { ConnectionScope::current() }).await?;
    /// assert_eq!(scope.app().proto_count(), app.proto_count());
    /// # Ok(()) }
    /// ```
    pub fn app(&self) -> &App {
        &self.app
    }
}

impl fmt::Debug for ConnectionScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionScope").field("app", &self.app).field("request", self.head.id()).finish()
    }
}
