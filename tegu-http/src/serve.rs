//! Serving an App: bind, serve its router, shut down gracefully, within a deadline.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tegu_core::{App, DiError};
use tokio::net::{TcpListener, TcpSocket, TcpStream, ToSocketAddrs};
use tokio::task::JoinSet;

use crate::probes::{Entry, ProbePaths};
use crate::route_error::RouteError;
use crate::router::RouterBuilder;
use crate::tracked::{TrackedStream, Tracker};

/// Why serving stopped with an error.
///
/// # Examples
///
/// ```
/// use tegu_http::ServeError;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let app = tegu_core::App::builder().build().await?;
/// // The address is in use: serving fails before the first request.
/// let error = tegu_http::serve(app, taken.local_addr()?).await.unwrap_err();
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
    /// A hosted service failed with `OnFailure::StopApp`: the server shut down gracefully, as
    /// on a signal (without the drain delay), and returns its error.
    #[error("a hosted service stopped the App: {0}")]
    Hosted(DiError),
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
/// let app = tegu_core::App::builder().build().await?;
/// // Serves until Ctrl-C or SIGTERM: after 100 ms, still serving.
/// let served = tokio::time::timeout(Duration::from_millis(100), tegu_http::serve(app, "127.0.0.1:0")).await;
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
/// let listener = tegu_http::listen("127.0.0.1:0", 2 * tegu_http::DEFAULT_BACKLOG).await?;
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
/// let app = tegu_core::App::builder().build().await?;
/// let listener = tegu_http::listen("127.0.0.1:0", 4096).await?;
/// let server = tegu_http::Server::new(app.clone(), tegu_http::router(&app)).with_graceful_shutdown(async {});
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
///     () = tegu_http::shutdown_signal() => true,
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
/// over HTTP/1.1 and HTTP/2 on the same port, with health probes, timeouts and a graceful
/// shutdown that cannot be held open.
///
/// - **HTTP/2**: a connection that opens with HTTP/2's preface (h2c with prior knowledge:
///   gRPC clients, `curl --http2-prior-knowledge`) is served over HTTP/2, each stream a request
///   in its own context scope; an idle one is pinged every 20 s and closed if the ping goes
///   unanswered. [`http1_only`](Self::http1_only) turns it off. No TLS: terminate it in front.
/// - **Probes**: `GET /health/live` and `GET /health/ready`, before the router
///   ([`health_paths`](Self::health_paths)).
/// - **Slow or idle clients**: a client has [`header_read_timeout`](Self::header_read_timeout)
///   (30 s) to send a request head (a connection that sends no request at all within it is
///   closed too, whatever its protocol); then its connection is closed. hyper starts that timer
///   whenever it waits for a HTTP/1.1 head, so it is also the idle timeout of a keep-alive
///   connection. An idle HTTP/2 connection that answers its pings stays open (as browsers and
///   gRPC clients expect), until the shutdown.
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
/// let app = tegu_core::App::builder().build().await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(
///     tegu_http::Server::new(app.clone(), tegu_http::router(&app))
///         .header_read_timeout(Duration::from_secs(10))
///         .drain_connections_timeout(Duration::from_secs(20))
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
    drain_connections_timeout: Duration,
    drain_delay: Duration,
    probes: Option<ProbePaths>,
    http2: bool,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("app", &self.app)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("drain_connections_timeout", &self.drain_connections_timeout)
            .field("drain_delay", &self.drain_delay)
            .field("probes", &self.probes)
            .field("http2", &self.http2)
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
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = tegu_http::Server::new(app, router).with_graceful_shutdown(async {}); // stops at once
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
            drain_connections_timeout: Duration::from_secs(30),
            drain_delay: Duration::ZERO,
            probes: Some(ProbePaths::default()),
            http2: true,
        }
    }

    /// How long the server goes on accepting and serving after the first shutdown signal, with
    /// readiness already false (`/health/ready` answers 503: [`App::begin_shutdown`]), before
    /// the graceful shutdown of [`run`](Self::run) begins: the time a load balancer takes to
    /// see the change and stop sending requests (Kubernetes: its probe period times its failure
    /// threshold, plus the endpoint's propagation). Default: zero. A second signal during the
    /// delay forces the shutdown as it does later.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let server = tegu_http::Server::new(app, router).drain_delay(std::time::Duration::from_secs(3));
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn drain_delay(mut self, delay: Duration) -> Self {
        self.drain_delay = delay;
        self
    }

    /// Where the liveness and readiness probes are answered (`GET` and `HEAD`). Default:
    /// `/health/live` and `/health/ready`. They are answered before the router, without a
    /// context scope: a route of the router on the same path is not reached.
    ///
    /// - live: 200 while the App serves, 503 once it is shut down or a hosted service stopped
    ///   it ([`App::is_live`]); runs no health check.
    /// - ready: 200 only when [`App::health`] says ready (built, every hosted service running,
    ///   every health check passing, no shutdown begun), else 503.
    ///
    /// Both answer JSON: `{"status":"up","state":"serving"}`, and for ready the checks
    /// (`name`, `status`, `took_ms`) and hosted services (`name`, `state`). A check's error is
    /// logged, never sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let server = tegu_http::Server::new(app, router).health_paths("/livez", "/readyz");
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn health_paths(mut self, live: impl Into<String>, ready: impl Into<String>) -> Self {
        self.probes = Some(ProbePaths { live: live.into(), ready: ready.into() });
        self
    }

    /// Serves no probe: every path goes to the router.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let server = tegu_http::Server::new(app, router).without_health_probes();
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn without_health_probes(mut self) -> Self {
        self.probes = None;
        self
    }

    /// Serves HTTP/1.1 only. By default a connection that opens with HTTP/2's preface (h2c,
    /// "prior knowledge": what gRPC clients and `curl --http2-prior-knowledge` send) is served
    /// over HTTP/2, on the same port.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let server = tegu_http::Server::new(app, router).http1_only();
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn http1_only(mut self) -> Self {
        self.http2 = false;
        self
    }

    /// Shuts down when `signal` resolves instead of on SIGINT/SIGTERM.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = tokio::spawn(
    ///     tegu_http::Server::new(app, router).with_graceful_shutdown(async { let _ = stopped.await; }).run(listener),
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
    /// let app = tegu_core::App::builder().build().await?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut client = tokio::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = tokio::spawn(
    ///     tegu_http::Server::new(app, router)
    ///         .with_graceful_shutdown(async { let _ = stopped.await; })
    ///         .with_forced_shutdown(tokio::time::sleep(Duration::from_millis(100))) // not a second Ctrl-C
    ///         .run(listener),
    /// );
    /// client.write_all(b"GET /hang HTTP/1.1\r\nhost: localhost\r\n\r\n").await?;
    /// called.notified().await; // the request is open
    /// stop.send(()).unwrap();
    /// let result = server.await?; // the drain would wait 30 s for `/hang`: cut instead
    /// assert!(matches!(result, Err(tegu_http::ServeError::Forced { connections: 1 })), "{result:?}");
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
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let server = tegu_http::Server::new(app, router).header_read_timeout(std::time::Duration::from_secs(10));
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
    /// own [`drain_scopes_timeout`](tegu_core::AppBuilder::drain_scopes_timeout) (10 s) for scopes still
    /// ending, plus the singletons' destroy hooks. Keep the sum under your orchestrator's grace
    /// period (Kubernetes: 30 s unless `terminationGracePeriodSeconds` says otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// // On Kubernetes' default 30 s grace period: leave time for `app.shutdown()`.
    /// let server = tegu_http::Server::new(app, router).drain_connections_timeout(std::time::Duration::from_secs(15));
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn drain_connections_timeout(mut self, timeout: Duration) -> Self {
        self.drain_connections_timeout = timeout;
        self
    }

    /// Accepts connections on `listener` until the shutdown signal (or a hosted service's
    /// failure: [`App::stop_requested`]), then:
    ///
    /// 0. turns readiness false ([`App::begin_shutdown`]) and, for the
    ///    [`drain_delay`](Self::drain_delay), goes on accepting and serving;
    /// 1. stops accepting, and asks every connection to close after its current request
    ///    (idle ones close at once; a streamed response is sent to its end first; HTTP/2: a
    ///    GOAWAY, and the streams in flight finish);
    /// 2. waits for them, at most [`drain_connections_timeout`](Self::drain_connections_timeout), upgraded
    ///    connections (WebSockets) included until their socket is dropped; past the deadline
    ///    the connections still open are cut (logged with their number): their requests are
    ///    cancelled and their context scopes end as cancelled scopes do, destroy hooks
    ///    included, and an upgraded socket fails its next read or write
    ///    (`ConnectionAborted`), which ends the task serving it (given 1 s);
    /// 3. shuts the App down ([`App::shutdown`]): it stops the hosted services, waits for the
    ///    scopes still ending, at most
    ///    [`AppBuilder::drain_scopes_timeout`](tegu_core::AppBuilder::drain_scopes_timeout), then runs the
    ///    singletons' destroy hooks, last.
    ///
    /// A second signal ([`with_forced_shutdown`](Self::with_forced_shutdown); by default a
    /// second SIGINT or SIGTERM) during steps 0 to 3 drops every connection and returns at
    /// once.
    ///
    /// Errors accepting a connection (out of file descriptors, for instance) are logged and
    /// retried after a second; they do not stop the server.
    ///
    /// # Errors
    ///
    /// [`ServeError::Shutdown`] if a destroy hook fails or the stop deadline cut one,
    /// [`ServeError::Forced`] after a second signal, [`ServeError::Hosted`] after a hosted
    /// service's failure.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::router(&app);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// println!("listening on {}", listener.local_addr()?);
    /// tegu_http::Server::new(app, router).with_graceful_shutdown(async {}).run(listener).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, listener: TcpListener) -> Result<(), ServeError> {
        self.run_boxed(listener).await
    }

    /// `run()`'s work, boxed here: so that tegu-http compiles the server's state machine (and
    /// the hyper connections it drives) once, instead of every crate that awaits `run()` or
    /// `serve()` (as tegu-core's `AppBuilder::build`).
    fn run_boxed(self, listener: TcpListener) -> Pin<Box<dyn Future<Output = Result<(), ServeError>> + Send>> {
        Box::pin(self.serve_until_shutdown(listener))
    }

    async fn serve_until_shutdown(self, listener: TcpListener) -> Result<(), ServeError> {
        let Server {
            app,
            router,
            mut shutdown,
            forced,
            header_read_timeout,
            drain_connections_timeout,
            drain_delay,
            probes,
            http2,
        } = self;
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, http2, "serving");
        }
        let mut http = auto::Builder::new(TokioExecutor::new());
        // Without a timer hyper applies no header timeout at all.
        http.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
        http.http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(HTTP2_KEEP_ALIVE)
            .keep_alive_timeout(HTTP2_KEEP_ALIVE);
        if !http2 {
            http = http.http1_only();
        }
        let (closing, closed) = tokio::sync::watch::channel(());
        let (cutting, cut) = tokio::sync::watch::channel(());
        let mut acceptor = Acceptor {
            http,
            entry: Entry { router, app: app.clone(), probes: probes.map(Arc::new), tracker: Arc::default() },
            told: Told { closed, cut },
            header_read_timeout,
            connections: JoinSet::new(),
        };
        let mut stop_requested = std::pin::pin!(app.stop_requested());
        let mut fatal = None;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                error = &mut stop_requested => {
                    tracing::error!(%error, "a hosted service stopped the App; shutting down");
                    fatal = Some(error);
                    break;
                }
                accepted = listener.accept() => if let Err(error) = acceptor.accepted(accepted) {
                    // Out of file descriptors, for instance: wait a little instead of
                    // spinning, still listening for the signal.
                    tracing::error!(%error, "accepting a connection failed; retrying in a second");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        () = &mut shutdown => break,
                    }
                },
                Some(_) = acceptor.connections.join_next(), if !acceptor.connections.is_empty() => {}
            }
        }
        app.begin_shutdown();
        // Listened for from now on, a default forced signal is the *next* SIGINT/SIGTERM.
        let mut forced = forced.unwrap_or_else(|| Box::pin(signals()));
        if !drain_delay.is_zero() && fatal.is_none() {
            tracing::info!(delay = ?drain_delay, "shutdown signal: not ready from now on; still serving for the drain delay");
            let delay = tokio::time::sleep(drain_delay);
            tokio::pin!(delay);
            loop {
                tokio::select! {
                    () = &mut delay => break,
                    () = &mut forced => return Err(force(&mut acceptor.connections)),
                    accepted = listener.accept() => if let Err(error) = acceptor.accepted(accepted) {
                        tracing::error!(%error, "accepting a connection failed during the drain delay; retrying in a second");
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = &mut delay => break,
                        }
                    },
                    Some(_) = acceptor.connections.join_next(), if !acceptor.connections.is_empty() => {}
                }
            }
        }
        drop(listener);
        let connections = &mut acceptor.connections;
        tracing::info!(
            connections = connections.len(),
            deadline = ?drain_connections_timeout,
            "shutting down: no longer accepting; draining the open connections"
        );
        drop(closing);
        let Some(drained) = drain_within(connections, drain_connections_timeout, &mut forced).await else {
            return Err(force(connections));
        };
        if !drained {
            tracing::warn!(
                connections = connections.len(),
                deadline = ?drain_connections_timeout,
                "shutdown deadline passed; cutting the connections still open (their requests are cancelled, their scopes still destroyed; upgraded ones fail their next read or write)"
            );
            drop(cutting);
            // Cutting is cooperative: a connection stuck in blocking code, or a WebSocket task
            // that never polls its socket again, cannot be stopped.
            match drain_within(connections, ABORT_GRACE, &mut forced).await {
                None => return Err(force(connections)),
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
        let shut = tokio::select! {
            result = app.shutdown() => result,
            () = &mut forced => return Err(force(connections)),
        };
        match (fatal, shut) {
            (Some(error), Err(shutdown)) => {
                tracing::error!(error = %shutdown, "the App's shutdown failed too");
                Err(ServeError::Hosted(error))
            }
            (Some(error), Ok(())) => Err(ServeError::Hosted(error)),
            (None, shut) => Ok(shut?),
        }
    }
}

/// How often an HTTP/2 connection is pinged, and how long the ping may go unanswered before
/// the connection is closed (a peer gone without a FIN).
const HTTP2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// What accepting a connection needs: the protocol builder, the service, what the server tells
/// connections, and the connections' tasks.
struct Acceptor {
    http: auto::Builder<TokioExecutor>,
    entry: Entry,
    told: Told,
    header_read_timeout: Option<Duration>,
    connections: JoinSet<()>,
}

impl Acceptor {
    /// Serves an accepted connection; an error of the listener (not of one connection) back.
    fn accepted(&mut self, accepted: io::Result<(TcpStream, std::net::SocketAddr)>) -> Result<(), io::Error> {
        match accepted {
            Ok((stream, _)) => {
                let task =
                    connection(&self.http, stream, self.entry.clone(), self.header_read_timeout, self.told.clone());
                self.connections.spawn(task);
                Ok(())
            }
            Err(error) if is_connection_error(&error) => Ok(()),
            Err(error) => Err(error),
        }
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
    http: &auto::Builder<TokioExecutor>,
    stream: TcpStream,
    entry: Entry,
    header_read_timeout: Option<Duration>,
    Told { mut closed, mut cut }: Told,
) -> impl Future<Output = ()> + Send + 'static {
    let tracker = Arc::new(Tracker::default());
    let io = TokioIo::new(TrackedStream::new(stream, tracker.clone()));
    let service = Entry { tracker: tracker.clone(), ..entry };
    let connection = http.serve_connection_with_upgrades(io, service).into_owned();
    async move {
        let cut_on_drop = CutOnDrop(tracker);
        let tracker = &cut_on_drop.0;
        // Until its first request, a connection has the header read timeout: hyper's own timer
        // starts only once it knows the protocol, which a silent client never tells it.
        let first_request = async {
            match header_read_timeout {
                Some(timeout) => {
                    tokio::time::sleep(timeout).await;
                    if tracker.was_requested() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        // In a future of its own, so that the connection (and a socket it still holds) is
        // dropped when it ends.
        let served = async {
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => Some(result),
                () = first_request => {
                    tracing::debug!(timeout = ?header_read_timeout, "no request within the header read timeout; connection closed");
                    None
                }
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
