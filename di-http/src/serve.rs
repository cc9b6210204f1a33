//! Serving an App: bind, serve its router, shut down gracefully.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;

use axum::Router;
use di_core::{App, DiError};
use tokio::net::{TcpListener, ToSocketAddrs};

use crate::controller::{RouteError, RouterBuilder};

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The controllers' routes are invalid: found before the first request.
    #[error(transparent)]
    Routes(#[from] RouteError),
    /// Binding or accepting failed.
    #[error("serving failed: {0}")]
    Io(#[from] io::Error),
    /// A destroy hook failed while the App shut down.
    #[error("the App's shutdown failed: {0}")]
    Shutdown(#[from] DiError),
}

/// Serves `app`'s controllers on `addr` until SIGINT (Ctrl-C) or SIGTERM, then stops accepting,
/// lets in-flight requests finish and shuts the App down (destroy hooks, in reverse order).
///
/// [`Server`] does the same with a router of your own, a listener and a shutdown signal.
///
/// # Errors
///
/// [`ServeError`]: invalid routes (before binding), an I/O error, or a failed shutdown.
pub async fn serve(app: App, addr: impl ToSocketAddrs) -> Result<(), ServeError> {
    let router = RouterBuilder::new(&app).build()?;
    let listener = TcpListener::bind(addr).await?;
    Server::new(app, router).run(listener).await
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM: the default shutdown signal of
/// [`serve`] and [`Server`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Serves a router (usually [`router`](crate::router), merged with your own routes) for an App,
/// with graceful shutdown.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = di_core::App::builder().build().await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(
///     di_http::Server::new(app.clone(), di_http::router(&app))
///         .with_graceful_shutdown(async { let _ = stopped.await; })
///         .run(listener),
/// );
/// stop.send(()).unwrap();
/// server.await??; // in-flight requests drained, then app.shutdown()
/// # Ok(()) }
/// ```
#[must_use]
pub struct Server {
    app: App,
    router: Router,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("app", &self.app).finish_non_exhaustive()
    }
}

impl Server {
    /// Serves `router` for `app`, until [`shutdown_signal`].
    pub fn new(app: App, router: Router) -> Self {
        Server { app, router, shutdown: Box::pin(shutdown_signal()) }
    }

    /// Shuts down when `signal` resolves instead of on SIGINT/SIGTERM.
    pub fn with_graceful_shutdown(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown = Box::pin(signal);
        self
    }

    /// Accepts connections on `listener` until the shutdown signal; then stops accepting, waits
    /// for in-flight requests and shuts the App down.
    ///
    /// # Errors
    ///
    /// [`ServeError::Io`] if serving fails, [`ServeError::Shutdown`] if a destroy hook fails.
    pub async fn run(self, listener: TcpListener) -> Result<(), ServeError> {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "serving");
        }
        axum::serve(listener, self.router).with_graceful_shutdown(self.shutdown).await?;
        tracing::info!("in-flight requests done; shutting the App down");
        self.app.shutdown().await?;
        Ok(())
    }
}
