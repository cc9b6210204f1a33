//! Serving an App: bind, serve its router, shut down gracefully, within a deadline.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use di_core::{App, DiError};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream, ToSocketAddrs};
use tokio::task::JoinSet;

use crate::router::{RouteError, RouterBuilder};
use crate::tracked::{TrackedStream, Tracker};

/// Why serving stopped with an error.
///
/// # Examples
///
/// ```
/// use di_http::ServeError;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let app = di_core::App::builder().build().await?;
/// // The address is in use: serving fails before the first request.
/// let error = di_http::serve(app, taken.local_addr()?).await.unwrap_err();
/// match &error {
///     ServeError::Io(io) => assert_eq!(io.kind(), std::io::ErrorKind::AddrInUse),
///     other => panic!("not an I/O error: {other}"),
/// }
/// assert!(error.to_string().starts_with("serving failed: "), "{error}");
/// # Ok(()) }
/// ```
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
    /// A second signal came during the shutdown: the open connections were cut at once and the
    /// App was not shut down (no destroy hook of its singletons ran).
    #[error("shutdown forced by a second signal: {connections} connection(s) cut, the App's singletons not destroyed")]
    Forced {
        /// The connections still open when the second signal came.
        connections: usize,
    },
}

/// Serves `app`'s controllers on `addr` until SIGINT (Ctrl-C) or SIGTERM, then shuts down as
/// [`Server::run`] describes, with its defaults (30 s to read a request head, 30 s to drain),
/// listening with a backlog of [`DEFAULT_BACKLOG`] ([`listen`] binds with another).
///
/// [`Server`] does the same with a router of your own, a listener, a shutdown signal and
/// other timeouts.
///
/// # Errors
///
/// [`ServeError`]: invalid routes (before binding), an I/O error, a failed or forced shutdown.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
///
/// let app = di_core::App::builder().build().await?;
/// // Serves until Ctrl-C or SIGTERM: after 100 ms, still serving.
/// let served = tokio::time::timeout(Duration::from_millis(100), di_http::serve(app, "127.0.0.1:0")).await;
/// assert!(served.is_err(), "serve returned: {served:?}");
/// # Ok(()) }
/// ```
pub async fn serve(app: App, addr: impl ToSocketAddrs) -> Result<(), ServeError> {
    let router = RouterBuilder::new(&app).build()?;
    let listener = listen(addr, DEFAULT_BACKLOG).await?;
    Server::new(app, router).run(listener).await
}

/// The listen backlog of [`serve`], and the one to give [`listen`] unless you know better: how
/// many connections the kernel queues for the server before it accepts them. 1024, in line with
/// production servers (nginx 511, HAProxy and Go's net/http the kernel's maximum), where
/// `std` and tokio's `TcpListener::bind` ask for 128: a burst of a few hundred connects then
/// overflows the queue, and the clients whose SYNs were dropped retry a second later.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
/// // What `serve` binds with; twice as much for a service that takes bursts.
/// let listener = di_http::listen("127.0.0.1:0", 2 * di_http::DEFAULT_BACKLOG).await?;
/// # drop(listener);
/// # Ok(()) }
/// ```
pub const DEFAULT_BACKLOG: u32 = 1024;

/// Binds a TCP listener on `addr` (the first of its addresses that binds) with a listen backlog
/// of `backlog`, `SO_REUSEADDR` set as `TcpListener::bind` sets it: what to give
/// [`Server::run`] for another backlog than [`serve`]'s [`DEFAULT_BACKLOG`].
///
/// The kernel caps the backlog at its own limit (on Linux `net.core.somaxconn`: 4096 since
/// Linux 5.4, 128 before), silently; raise that limit to go beyond it.
///
/// # Errors
///
/// The I/O error of the last address tried (in use, not allowed), or one saying that `addr`
/// resolved to no address.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = di_core::App::builder().build().await?;
/// let listener = di_http::listen("127.0.0.1:0", 4096).await?;
/// let server = di_http::Server::new(app.clone(), di_http::router(&app)).with_graceful_shutdown(async {});
/// server.run(listener).await?;
/// # Ok(()) }
/// ```
pub async fn listen(addr: impl ToSocketAddrs, backlog: u32) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(addr).await? {
        let bound = (|| {
            let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
            #[cfg(unix)]
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(backlog)
        })();
        match bound {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the address resolved to no address")))
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM: the default shutdown signal of
/// [`serve`] and [`Server`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
///
/// // No signal comes: the timer wins.
/// let signalled = tokio::select! {
///     () = di_http::shutdown_signal() => true,
///     () = tokio::time::sleep(Duration::from_millis(50)) => false,
/// };
/// assert!(!signalled);
/// // To do more on the signal: `server.with_graceful_shutdown(async { shutdown_signal().await; /* log */ })`.
/// # }
/// ```
pub async fn shutdown_signal() {
    signals().await;
}

/// SIGINT or SIGTERM, listened for from now on (on Unix the handlers are installed before this
/// returns, so no signal between now and the first poll is missed).
fn signals() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves a router (usually [`router`](crate::router), merged with your own routes) for an App
/// over HTTP/1.1, with timeouts and a graceful shutdown that cannot be held open.
///
/// - **Slow or idle clients**: a client has [`header_read_timeout`](Self::header_read_timeout)
///   (30 s) to send a request head; then its connection is closed. hyper starts that timer
///   whenever it waits for a head, so it is also the idle timeout of a keep-alive connection.
///   A request body is read as fast as the client sends it, with no timeout of its own: a
///   handler waiting for a slow body holds its request (and scope) until the body ends, the
///   client goes away or the shutdown deadline passes. Bound it with a tower layer, for
///   instance `tower_http::timeout::RequestBodyTimeoutLayer`, through
///   [`RouterBuilder::layer`](crate::RouterBuilder::layer).
/// - **Shutdown**: see [`run`](Self::run).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
///
/// let app = di_core::App::builder().build().await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(
///     di_http::Server::new(app.clone(), di_http::router(&app))
///         .header_read_timeout(Duration::from_secs(10))
///         .shutdown_timeout(Duration::from_secs(20))
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
    shutdown: Signal,
    forced: Option<Signal>,
    header_read_timeout: Option<Duration>,
    shutdown_timeout: Duration,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("app", &self.app)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Serves `router` for `app`, until [`shutdown_signal`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let router = di_http::router(&app);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = di_http::Server::new(app, router).with_graceful_shutdown(async {}); // stops at once
    /// server.run(listener).await?;
    /// # Ok(()) }
    /// ```
    pub fn new(app: App, router: Router) -> Self {
        Server {
            app,
            router,
            shutdown: Box::pin(shutdown_signal()),
            forced: None,
            header_read_timeout: Some(Duration::from_secs(30)),
            shutdown_timeout: Duration::from_secs(30),
        }
    }

    /// Shuts down when `signal` resolves instead of on SIGINT/SIGTERM.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let router = di_http::router(&app);
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = tokio::spawn(
    ///     di_http::Server::new(app, router).with_graceful_shutdown(async { let _ = stopped.await; }).run(listener),
    /// );
    /// stop.send(()).unwrap(); // drains open requests, then `app.shutdown()`
    /// server.await??;
    /// # Ok(()) }
    /// ```
    pub fn with_graceful_shutdown(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown = Box::pin(signal);
        self
    }

    /// Cuts a shutdown short when `signal` resolves: open connections are dropped at once and
    /// [`run`](Self::run) returns [`ServeError::Forced`] without shutting the App down. By
    /// default, a SIGINT or SIGTERM received after the shutdown began (the second Ctrl-C).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::{sync::Arc, time::Duration};
    /// use tokio::io::AsyncWriteExt;
    ///
    /// // A route that never answers, and says when it is called.
    /// let called = Arc::new(tokio::sync::Notify::new());
    /// let notify = Arc::clone(&called);
    /// let router = axum::Router::new().route("/hang", axum::routing::get(move || {
    ///     notify.notify_one();
    ///     std::future::pending::<&'static str>()
    /// }));
    /// let app = di_core::App::builder().build().await?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut client = tokio::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = tokio::spawn(
    ///     di_http::Server::new(app, router)
    ///         .with_graceful_shutdown(async { let _ = stopped.await; })
    ///         .with_forced_shutdown(tokio::time::sleep(Duration::from_millis(100))) // not a second Ctrl-C
    ///         .run(listener),
    /// );
    /// client.write_all(b"GET /hang HTTP/1.1\r\nhost: localhost\r\n\r\n").await?;
    /// called.notified().await; // the request is open
    /// stop.send(()).unwrap();
    /// let result = server.await?; // the drain would wait 30 s for `/hang`: cut instead
    /// assert!(matches!(result, Err(di_http::ServeError::Forced { connections: 1 })), "{result:?}");
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn with_forced_shutdown(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.forced = Some(Box::pin(signal));
        self
    }

    /// How long a client may take to send a request head, on a new connection or between the
    /// requests of a keep-alive connection; then the connection is closed. `None` waits
    /// forever. Default: 30 seconds.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let router = di_http::router(&app);
    /// let server = di_http::Server::new(app, router).header_read_timeout(std::time::Duration::from_secs(10));
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.header_read_timeout = timeout.into();
        self
    }

    /// How long the shutdown lets open connections finish their requests. Default: 30 seconds.
    ///
    /// The whole shutdown can take this, plus 1 s for cut connections to stop, plus the App's
    /// own [`shutdown_timeout`](di_core::AppBuilder::shutdown_timeout) (10 s) for scopes still
    /// ending, plus the singletons' destroy hooks. Keep the sum under your orchestrator's grace
    /// period (Kubernetes: 30 s unless `terminationGracePeriodSeconds` says otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let router = di_http::router(&app);
    /// // On Kubernetes' default 30 s grace period: leave time for `app.shutdown()`.
    /// let server = di_http::Server::new(app, router).shutdown_timeout(std::time::Duration::from_secs(15));
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Accepts connections on `listener` until the shutdown signal, then:
    ///
    /// 1. stops accepting, and asks every connection to close after its current request
    ///    (idle ones close at once; a streamed response is sent to its end first);
    /// 2. waits for them, at most [`shutdown_timeout`](Self::shutdown_timeout), upgraded
    ///    connections (WebSockets) included until their socket is dropped; past the deadline
    ///    the connections still open are cut (logged with their number): their requests are
    ///    cancelled and their context scopes end as cancelled scopes do, destroy hooks
    ///    included, and an upgraded socket fails its next read or write
    ///    (`ConnectionAborted`), which ends the task serving it (given 1 s);
    /// 3. shuts the App down ([`App::shutdown`]): it waits for the scopes still ending, at most
    ///    [`AppBuilder::shutdown_timeout`](di_core::AppBuilder::shutdown_timeout), then runs the
    ///    singletons' destroy hooks, last.
    ///
    /// A second signal ([`with_forced_shutdown`](Self::with_forced_shutdown); by default a
    /// second SIGINT or SIGTERM) during steps 2 and 3 drops every connection and returns at
    /// once.
    ///
    /// Errors accepting a connection (out of file descriptors, for instance) are logged and
    /// retried after a second; they do not stop the server.
    ///
    /// # Errors
    ///
    /// [`ServeError::Shutdown`] if a destroy hook fails, [`ServeError::Forced`] after a second
    /// signal.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let router = di_http::router(&app);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// println!("listening on {}", listener.local_addr()?);
    /// di_http::Server::new(app, router).with_graceful_shutdown(async {}).run(listener).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, listener: TcpListener) -> Result<(), ServeError> {
        let Server { app, router, mut shutdown, forced, header_read_timeout, shutdown_timeout } = self;
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "serving");
        }
        let mut http = hyper::server::conn::http1::Builder::new();
        // Without a timer hyper applies no header timeout at all.
        http.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
        let (closing, closed) = tokio::sync::watch::channel(());
        let (cutting, cut) = tokio::sync::watch::channel(());
        let told = Told { closed, cut };
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(connection(&http, stream, router.clone(), told.clone()));
                    }
                    Err(error) if is_connection_error(&error) => {}
                    Err(error) => {
                        // Out of file descriptors, for instance: wait a little instead of
                        // spinning, still listening for the signal.
                        tracing::error!(%error, "accepting a connection failed; retrying in a second");
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = &mut shutdown => break,
                        }
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        // Listened for from now on, a default forced signal is the *next* SIGINT/SIGTERM.
        let mut forced = forced.unwrap_or_else(|| Box::pin(signals()));
        tracing::info!(
            connections = connections.len(),
            deadline = ?shutdown_timeout,
            "shutting down: no longer accepting; draining the open connections"
        );
        drop(closing);
        let Some(drained) = drain_within(&mut connections, shutdown_timeout, &mut forced).await else {
            return Err(force(&mut connections));
        };
        if !drained {
            tracing::warn!(
                connections = connections.len(),
                deadline = ?shutdown_timeout,
                "shutdown deadline passed; cutting the connections still open (their requests are cancelled, their scopes still destroyed; upgraded ones fail their next read or write)"
            );
            drop(cutting);
            // Cutting is cooperative: a connection stuck in blocking code, or a WebSocket task
            // that never polls its socket again, cannot be stopped.
            match drain_within(&mut connections, ABORT_GRACE, &mut forced).await {
                None => return Err(force(&mut connections)),
                Some(false) => {
                    tracing::error!(
                        connections = connections.len(),
                        "connections did not stop when cut (blocking code in a handler, a WebSocket task not reading?); shutting down without them"
                    );
                    connections.abort_all();
                }
                Some(true) => {}
            }
        }
        tracing::info!(scopes_ending = app.scopes_ending(), "connections closed; shutting the App down");
        tokio::select! {
            result = app.shutdown() => result?,
            () = &mut forced => return Err(force(&mut connections)),
        }
        Ok(())
    }
}

/// How long cut connections get to stop before the shutdown goes on without them.
const ABORT_GRACE: Duration = Duration::from_secs(1);

/// What the server tells its connections: close after the current request (`closed`), stop
/// now (`cut`). Each fires when its sender is dropped.
#[derive(Clone)]
struct Told {
    closed: tokio::sync::watch::Receiver<()>,
    cut: tokio::sync::watch::Receiver<()>,
}

/// Serves one connection until it ends, or closes it gracefully once `closed` fires. An
/// upgraded connection (a WebSocket: hyper hands its socket to the upgrade's owner, and its
/// future ends) stays counted until that socket is dropped. `cut` ends it: the requests are
/// cancelled (the future is dropped), an upgraded socket fails its next read or write; so does
/// dropping this task (a forced shutdown aborts it).
fn connection(
    http: &hyper::server::conn::http1::Builder,
    stream: TcpStream,
    router: Router,
    Told { mut closed, mut cut }: Told,
) -> impl Future<Output = ()> + Send + 'static {
    let tracker = Arc::new(Tracker::default());
    let io = TokioIo::new(TrackedStream::new(stream, tracker.clone()));
    let connection = http.serve_connection(io, TowerToHyperService::new(router)).with_upgrades();
    async move {
        let cut_on_drop = CutOnDrop(tracker);
        // In a future of its own, so that the connection (and a socket it still holds) is
        // dropped when it ends.
        let served = async {
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => Some(result),
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        result = connection.as_mut() => Some(result),
                        _ = cut.changed() => None,
                    }
                }
                _ = cut.changed() => None,
            }
        };
        let Some(result) = served.await else { return };
        if let Err(error) = result {
            // A header timeout, a client that hung up: the client's business, not an error of ours.
            tracing::debug!(%error, "connection closed");
        }
        let tracker = &cut_on_drop.0;
        if tracker.alive() {
            // Upgraded: wait for its owner to let go of the socket, or for the deadline.
            tokio::select! {
                () = tracker.gone() => {}
                _ = cut.changed() => {
                    tracker.cut();
                    tracker.gone().await;
                }
            }
        }
    }
}

/// Cuts an upgraded socket when its connection's task ends early (aborted, or cut).
struct CutOnDrop(Arc<Tracker>);

impl Drop for CutOnDrop {
    fn drop(&mut self) {
        if self.0.alive() {
            self.0.cut();
        }
    }
}

/// Waits for every connection to end, at most `within`: whether they all did, or `None` if the
/// forced signal came first.
async fn drain_within(connections: &mut JoinSet<()>, within: Duration, forced: &mut Signal) -> Option<bool> {
    let drain = async { while connections.join_next().await.is_some() {} };
    tokio::select! {
        () = drain => Some(true),
        () = tokio::time::sleep(within) => Some(false),
        () = forced => None,
    }
}

fn force(connections: &mut JoinSet<()>) -> ServeError {
    let cut = connections.len();
    tracing::warn!(connections = cut, "second signal: cutting the open connections and exiting now");
    connections.abort_all();
    ServeError::Forced { connections: cut }
}

/// Errors of one incoming connection, not of the listener (axum's `serve` skips the same).
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
