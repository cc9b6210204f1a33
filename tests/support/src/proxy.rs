//! A fault-injecting TCP proxy between a client and a real server: the network failures a test
//! cannot get from the server itself, at the point the test chooses.
//!
//! [`FaultProxy::start`] listens on a free port of 127.0.0.1 and forwards every connection to
//! the server. It runs on a thread and a runtime of its own, so that it outlives the runtime of
//! the code under test (a process stopped mid-work is a runtime dropped). Faults:
//!
//! - [`cut_commit`](FaultProxy::cut_commit) (PostgreSQL): the `n`-th `COMMIT` from now is cut
//!   [`BeforeSend`](Cut::BeforeSend) (the connection closed instead of forwarding it: the server
//!   rolls the transaction back) or [`AfterAnswer`](Cut::AfterAnswer) (forwarded, the server's
//!   whole answer read and dropped, then the connection closed: the transaction is committed
//!   and the client never hears it);
//! - [`set_down`](FaultProxy::set_down): every connection cut and new ones closed at once, until
//!   it is up again (a server or network that is down);
//! - [`cut_all`](FaultProxy::cut_all): every open connection cut (a server restarted).
//!
//! PostgreSQL connections are read message by message, client to server and server to client,
//! to find the `COMMIT`s and their answers: connect with `sslmode=disable`, so that the bytes
//! are the protocol's. Other protocols (NATS) are copied as bytes.
//!
//! # Examples
//!
//! ```no_run
//! use tegu_test_support::proxy::{Cut, FaultProxy, Protocol};
//!
//! let server: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
//! let proxy = FaultProxy::start(server, Protocol::Postgres).unwrap();
//! let url = format!("postgres://postgres@{}/postgres?sslmode=disable", proxy.addr());
//! proxy.cut_commit(1, Cut::AfterAnswer); // the next COMMIT is applied, its answer lost
//! # let _ = url;
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy reads of the bytes it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// PostgreSQL's frontend/backend protocol, without TLS: its `COMMIT`s can be cut.
    Postgres,
    /// Bytes, copied as they come.
    Opaque,
}

/// Where a `COMMIT` is cut ([`FaultProxy::cut_commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The connection is closed instead of forwarding the `COMMIT`: the server never gets it.
    BeforeSend,
    /// The `COMMIT` is forwarded, the server's answer read to its end and dropped, then the
    /// connection closed: applied, and the client never hears so.
    AfterAnswer,
}

/// A cut the proxy made ([`FaultProxy::cuts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutMade {
    /// Which `COMMIT` it was, counting from the proxy's start (1 is the first).
    pub commit: u64,
    /// Where it was cut.
    pub at: Cut,
}

/// A fault-injecting TCP proxy on 127.0.0.1 (see the [module](self)). Dropping it stops it and
/// cuts its connections.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    protocol: Protocol,
    /// `COMMIT`s seen so far.
    commits: AtomicU64,
    /// The planned cuts: the `COMMIT` number they cut, and where.
    planned: Mutex<Vec<(u64, Cut)>>,
    cuts: Mutex<Vec<CutMade>>,
    down: AtomicBool,
    /// Bumped to cut every open connection.
    generation: watch::Sender<u64>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free port of 127.0.0.1, on a thread of its own.
    ///
    /// # Errors
    ///
    /// When no port can be bound, or the thread not started.
    pub fn start(upstream: SocketAddr, protocol: Protocol) -> std::io::Result<FaultProxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            protocol,
            commits: AtomicU64::new(0),
            planned: Mutex::new(Vec::new()),
            cuts: Mutex::new(Vec::new()),
            down: AtomicBool::new(false),
            generation: watch::Sender::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        let serving = Arc::clone(&shared);
        std::thread::Builder::new().name(format!("fault-proxy-{}", addr.port())).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else { return };
                serve(listener, serving, stopped).await;
            });
        })?;
        Ok(FaultProxy { addr, shared, stop })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the `n`-th `COMMIT` from now (1 is the next) at `at` (PostgreSQL only).
    pub fn cut_commit(&self, n: u64, at: Cut) {
        let nth = self.shared.commits.load(Ordering::SeqCst) + n.max(1);
        lock(&self.shared.planned).push((nth, at));
    }

    /// Drops the cuts planned and not made yet.
    pub fn clear_cuts(&self) {
        lock(&self.shared.planned).clear();
    }

    /// How many `COMMIT`s went through (or were cut) so far.
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::SeqCst)
    }

    /// The cuts made so far, in order.
    pub fn cuts(&self) -> Vec<CutMade> {
        lock(&self.shared.cuts).clone()
    }

    /// Down: every open connection cut, new ones closed at once. Up again: forwarded again.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
        if down {
            self.cut_all();
        }
    }

    /// Cuts every open connection (a server restarted); new ones are forwarded.
    pub fn cut_all(&self) {
        self.shared.generation.send_modify(|g| *g += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.cut_all();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let Ok((client, _)) = accepted else { continue };
        if shared.down.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(shared.upstream).await else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            connection(client, server, shared).await;
        });
    }
}

/// One client's connection, until either side closes or a fault cuts it.
async fn connection(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let mut cut = shared.generation.subscribe();
    cut.mark_unchanged();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Set by the client's side when it forwarded a COMMIT whose answer is to be dropped.
    let (drop_answer, answer_dropped) = watch::channel(false);
    let forward = async {
        match shared.protocol {
            Protocol::Opaque => {
                let up = copy(client_read, server_write);
                let down = copy(server_read, client_write);
                tokio::join!(up, down);
            }
            Protocol::Postgres => {
                let encryption_asked = AtomicU64::new(0);
                let up = frontend(client_read, server_write, &shared, &encryption_asked, drop_answer);
                let down = backend(server_read, client_write, &encryption_asked, answer_dropped);
                // Either side ending ends the connection: a cut closes both.
                tokio::select! {
                    _ = up => {}
                    _ = down => {}
                }
            }
        }
    };
    tokio::select! {
        _ = forward => {}
        _ = cut.changed() => {}
    }
}

async fn copy(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf) {
    let _ = tokio::io::copy(&mut from, &mut to).await;
    let _ = to.shutdown().await;
}

/// The client's messages to PostgreSQL: the untyped ones of the start (an SSL or GSS request
/// answered `N`, the startup message, a cancel request), then typed ones. A simple query that
/// commits is counted, and cut where the plan says.
async fn frontend(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shared: &Shared,
    encryption_asked: &AtomicU64,
    drop_answer: watch::Sender<bool>,
) {
    const SSL_REQUEST: u32 = 80_877_103;
    const GSS_REQUEST: u32 = 80_877_104;
    // The untyped messages: length, then body; requests for encryption come before the startup.
    loop {
        let Ok(len) = from.read_u32().await else { return };
        let Some(body_len) = (len as usize).checked_sub(4) else { return };
        let mut body = vec![0; body_len];
        if from.read_exact(&mut body).await.is_err() {
            return;
        }
        let code = body.get(..4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        let asks_encryption = code == Some(SSL_REQUEST) || code == Some(GSS_REQUEST);
        if asks_encryption {
            // Counted before it is sent: the server's one-byte answer comes after.
            encryption_asked.fetch_add(1, Ordering::SeqCst);
        }
        if to.write_all(&len.to_be_bytes()).await.is_err() || to.write_all(&body).await.is_err() {
            return;
        }
        if !asks_encryption {
            break;
        }
    }
    loop {
        let Ok(kind) = from.read_u8().await else { return };
        let Ok(len) = from.read_u32().await else { return };
        let Some(body_len) = (len as usize).checked_sub(4) else { return };
        let mut body = vec![0; body_len];
        if from.read_exact(&mut body).await.is_err() {
            return;
        }
        if kind == b'Q' && commits(&body) {
            let nth = shared.commits.fetch_add(1, Ordering::SeqCst) + 1;
            let planned = {
                let mut planned = lock(&shared.planned);
                planned.iter().position(|(n, _)| *n == nth).map(|i| planned.remove(i).1)
            };
            if let Some(at) = planned {
                lock(&shared.cuts).push(CutMade { commit: nth, at });
                match at {
                    Cut::BeforeSend => return,
                    Cut::AfterAnswer => {
                        drop_answer.send_replace(true);
                    }
                }
            }
        }
        if to.write_all(&[kind]).await.is_err()
            || to.write_all(&len.to_be_bytes()).await.is_err()
            || to.write_all(&body).await.is_err()
        {
            return;
        }
        if *drop_answer.borrow() {
            // Nothing more goes to the server; the other side ends the connection once the
            // answer is read.
            std::future::pending::<()>().await;
        }
    }
}

/// Whether a simple query's text (a C string) has a `COMMIT` statement.
fn commits(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(body)).to_ascii_uppercase();
    text.split(';').any(|statement| statement.trim() == "COMMIT")
}

/// PostgreSQL's messages to the client: one byte for each encryption request the client's side
/// forwarded (`N`; an `S` makes the rest TLS, copied as bytes), then typed messages. Once the
/// client's side forwarded a `COMMIT` to cut after its answer, what comes is read and dropped up
/// to the end of the answer (`ReadyForQuery`), and the connection closed.
async fn backend(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    encryption_asked: &AtomicU64,
    answer_dropped: watch::Receiver<bool>,
) {
    loop {
        let Ok(kind) = from.read_u8().await else { return };
        if encryption_asked.load(Ordering::SeqCst) > 0 {
            encryption_asked.fetch_sub(1, Ordering::SeqCst);
            if to.write_all(&[kind]).await.is_err() {
                return;
            }
            if kind == b'S' {
                let _ = tokio::io::copy(&mut from, &mut to).await;
                return;
            }
            continue;
        }
        let Ok(len) = from.read_u32().await else { return };
        let Some(body_len) = (len as usize).checked_sub(4) else { return };
        let mut body = vec![0; body_len];
        if from.read_exact(&mut body).await.is_err() {
            return;
        }
        if *answer_dropped.borrow() {
            if kind == b'Z' {
                return;
            }
            continue;
        }
        if to.write_all(&[kind]).await.is_err()
            || to.write_all(&len.to_be_bytes()).await.is_err()
            || to.write_all(&body).await.is_err()
        {
            return;
        }
    }
}
