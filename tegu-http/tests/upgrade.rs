//! Upgraded connections (WebSockets) over real sockets: a scope per connection or per message
//! through `ConnectionScope`, and a graceful shutdown that waits for a live socket, cuts it at
//! its deadline, and only then destroys the singletons.
#![allow(missing_docs, missing_debug_implementations)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use tegu_core::{App, ContextRef, context_proto, singleton_proto};
use tegu_http::{ConnectionScope, RequestHead, ServeError, Server, http_controller, http_routes};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

tegu_test_support::journal_proto!();

/// A singleton the sockets use: it must not be used once destroyed.
#[singleton_proto(destroy = close)]
pub struct Pool {
    #[inject]
    journal: Arc<Journal>,
    closed: AtomicBool,
}

impl Pool {
    fn query(&self) {
        if self.closed.load(Ordering::SeqCst) {
            self.journal.push("the pool was used after its destroy hook");
        }
    }
    async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.journal.push("pool closed");
    }
}

static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// Numbers the sessions.
pub struct Number(usize);

impl Default for Number {
    fn default() -> Self {
        Number(SESSIONS.fetch_add(1, Ordering::SeqCst))
    }
}

/// A context object of the socket's scope: per connection or per message.
#[context_proto(destroy = finish)]
pub struct Session {
    #[inject]
    head: Arc<RequestHead>,
    #[inject]
    journal: Arc<Journal>,
    number: Number,
}

impl Session {
    async fn finish(&self) {
        self.journal.push(format!("session {} of {} destroyed", self.number.0, self.head.id()));
    }
}

#[http_controller(path = "/ws")]
pub struct SocketController {
    #[inject]
    pool: Arc<Pool>,
    #[inject]
    session: ContextRef<Session>,
    #[inject]
    journal: Arc<Journal>,
}

/// Answers each text message with the request id, the session's number and the text.
fn reply(session: &Session, text: &str) -> Message {
    Message::Text(format!("{} #{}: {text}", session.head.id(), session.number.0).into())
}

#[http_routes]
impl SocketController {
    /// One scope for the whole connection.
    #[get("/connection")]
    async fn per_connection(&self, upgrade: WebSocketUpgrade) -> Response {
        let scope = ConnectionScope::current().expect("in the request's scope");
        let (pool, session, journal) = (self.pool.clone(), self.session, self.journal.clone());
        upgrade.on_upgrade(move |mut socket: WebSocket| async move {
            scope
                .run(async move {
                    while let Some(Ok(message)) = socket.recv().await {
                        if let Message::Text(text) = message {
                            pool.query();
                            if socket.send(reply(&session.get(), &text)).await.is_err() {
                                break;
                            }
                        }
                    }
                    journal.push("socket ended");
                })
                .await;
        })
    }

    /// A scope per message.
    #[get("/message")]
    async fn per_message(&self, upgrade: WebSocketUpgrade) -> Response {
        let scope = ConnectionScope::current().expect("in the request's scope");
        let session = self.session;
        upgrade.on_upgrade(move |mut socket: WebSocket| async move {
            while let Some(Ok(Message::Text(text))) = socket.recv().await {
                let answer = scope.run(async { reply(&session.get(), &text) }).await;
                if socket.send(answer).await.is_err() {
                    break;
                }
            }
        })
    }
}

struct Running {
    addr: SocketAddr,
    app: App,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Running {
    async fn start(deadline: Duration) -> Running {
        Running::start_with(deadline, std::future::pending()).await
    }

    /// With a forced shutdown when `forced` resolves.
    async fn start_with(deadline: Duration, forced: impl std::future::Future<Output = ()> + Send + 'static) -> Running {
        let app = App::builder().build().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            Server::new(app.clone(), tegu_http::router(&app))
                .drain_connections_timeout(deadline)
                .with_graceful_shutdown(async {
                    stopped.await.ok();
                })
                .with_forced_shutdown(forced)
                .run(listener),
        );
        Running { addr, app, stop: Some(stop), server }
    }

    fn journal(&self) -> Arc<Journal> {
        self.app.get_object::<Journal>().unwrap()
    }
}

type Client = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(addr: SocketAddr, path: &str, id: &str) -> Client {
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    request.headers_mut().insert("x-request-id", id.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.expect("the upgrade").0
}

/// Sends `text`, returns the reply.
async fn ask(client: &mut Client, text: &str) -> String {
    client.send(tungstenite::Message::text(text)).await.unwrap();
    match client.next().await {
        Some(Ok(tungstenite::Message::Text(reply))) => reply.to_string(),
        other => panic!("no reply to {text}: {other:?}"),
    }
}

/// The session number in a reply `id #n: text`.
fn number(reply: &str) -> usize {
    reply.split('#').nth(1).and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_scope_lasts_the_connection_and_a_message_scope_each_message() {
    let running = Running::start(Duration::from_secs(5)).await;
    let mut whole = connect(running.addr, "/ws/connection", "ws-whole").await;
    let (a, b) = (ask(&mut whole, "one").await, ask(&mut whole, "two").await);
    assert!(a.starts_with("ws-whole #") && a.ends_with(": one"), "{a}");
    assert_eq!(number(&a), number(&b), "one session for the connection");

    let mut each = connect(running.addr, "/ws/message", "ws-each").await;
    let (c, d) = (ask(&mut each, "one").await, ask(&mut each, "two").await);
    assert!(c.starts_with("ws-each #"), "{c}");
    assert_ne!(number(&c), number(&d), "a session per message");
    let journal = running.journal();
    let destroyed = |n: usize| format!("session {n} of ws-each destroyed");
    journal.eventually(|lines| lines.contains(&destroyed(number(&c))) && lines.contains(&destroyed(number(&d)))).await;

    whole.close(None).await.unwrap();
    let ended = format!("session {} of ws-whole destroyed", number(&a));
    let lines = journal.eventually(|lines| lines.contains(&ended)).await;
    let at = |line: &str| lines.iter().position(|l| l == line).unwrap();
    assert!(at("socket ended") < at(&ended), "{lines:?}");
    drop(each);
    let mut running = running;
    running.stop.take().unwrap().send(()).unwrap();
    running.server.await.unwrap().unwrap();
}

/// The shutdown waits for a live WebSocket (a message sent while it drains is still answered),
/// cuts it at the deadline, and destroys the singletons only once the socket and its scope are
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_open_across_a_graceful_shutdown_is_waited_for_then_cut_before_singletons_go() {
    let mut running = Running::start(Duration::from_millis(500)).await;
    let mut client = connect(running.addr, "/ws/connection", "ws-open").await;
    let first = ask(&mut client, "before").await;
    running.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!running.server.is_finished(), "the server returned under a live socket");
    let during = ask(&mut client, "during the drain").await;
    assert_eq!(number(&first), number(&during));
    // At the deadline the socket is cut: the client sees it end.
    let end = tokio::time::timeout(Duration::from_secs(5), client.next()).await.expect("cut at the deadline");
    assert!(!matches!(end, Some(Ok(tungstenite::Message::Text(_)))), "{end:?}");
    let journal = running.journal();
    running.server.await.unwrap().unwrap();
    let lines = journal.lines();
    let session = format!("session {} of ws-open destroyed", number(&first));
    assert_eq!(lines, ["socket ended", session.as_str(), "pool closed", "singletons destroyed"]);
}

/// A second signal cuts a live WebSocket at once, as it cuts requests: the socket's next read
/// fails, and its task ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_shutdown_cuts_a_websocket_at_once() {
    let (force, forced) = tokio::sync::oneshot::channel::<()>();
    let mut running = Running::start_with(Duration::from_secs(60), async {
        forced.await.ok();
    })
    .await;
    let mut client = connect(running.addr, "/ws/connection", "ws-forced").await;
    ask(&mut client, "before").await;
    running.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!running.server.is_finished(), "waiting for the socket, up to 60 s");
    force.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), &mut running.server).await.expect("returned").unwrap();
    assert!(matches!(result, Err(ServeError::Forced { connections: 1 })), "{result:?}");
    let end = tokio::time::timeout(Duration::from_secs(5), client.next()).await.expect("the socket was cut");
    assert!(!matches!(end, Some(Ok(tungstenite::Message::Text(_)))), "{end:?}");
    running.journal().eventually(|lines| lines.iter().any(|l| l == "socket ended")).await;
}
