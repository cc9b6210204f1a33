//! The gRPC service over a real socket, with tonic's generated client, on the same port as the
//! HTTP API.

use std::net::SocketAddr;

use grpc_todos::pb;
use pb::todos_client::TodosClient;
use tegu_core::App;
use tegu_test_support::http_client::send;
use todos::advice::TodoStats;
use tonic::Code;
use tonic::transport::Channel;

/// The graph `main` builds, checked with nothing built (`AppBuilder::check`).
#[test]
fn the_graph_checks() {
    todos::builder().check().unwrap();
}

struct Service {
    addr: SocketAddr,
    app: App,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tegu_http::ServeError>>,
}

impl Service {
    /// The App of `todos::builder()` on a fresh database, served on a free port.
    async fn start(name: &str) -> Service {
        let db = tegu_test_support::fresh_sqlite(&format!("todos-grpc-{name}"));
        let app = todos::builder().config_value("db.path", db.display().to_string()).build().await.unwrap();
        let router = grpc_todos::router(&app).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            tegu_http::Server::new(app.clone(), router)
                .with_graceful_shutdown(async {
                    stopped.await.ok();
                })
                .run(listener),
        );
        Service { addr, app, stop, server }
    }

    async fn client(&self) -> TodosClient<Channel> {
        TodosClient::connect(format!("http://{}", self.addr)).await.unwrap()
    }

    fn completed(&self) -> u64 {
        self.app.get_object::<TodoStats>().unwrap().completed()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

async fn list(client: &mut TodosClient<Channel>, user: &str) -> Vec<pb::TodoReply> {
    client.list(pb::ListRequest { user: user.into() }).await.unwrap().into_inner().todos
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_served_in_its_own_scope_and_commits() {
    let service = Service::start("commit").await;
    let mut client = service.client().await;
    let todo =
        client.add(pb::AddRequest { user: "ada".into(), title: "write the docs".into() }).await.unwrap().into_inner();
    assert_eq!((todo.title.as_str(), todo.done), ("write the docs", false));
    // Another call, another scope: it sees the first one's write, committed.
    assert_eq!(list(&mut client, "ada").await, [todo]);
    assert!(list(&mut client, "bob").await.is_empty());
    // Errors map to gRPC codes, with no internals.
    let invalid = client.add(pb::AddRequest { user: "ada".into(), title: " ".into() }).await.unwrap_err();
    assert_eq!(invalid.code(), Code::InvalidArgument, "{invalid:?}");
    let missing = client.complete(pb::CompleteRequest { user: "ada".into(), id: 999, fail_after: false }).await;
    assert_eq!(missing.unwrap_err().code(), Code::NotFound);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_returns_an_error_status_rolls_back_and_drops_its_events() {
    let service = Service::start("rollback").await;
    let mut client = service.client().await;

    // The first title is written in the call's transaction, then the second fails the call.
    let failed = client
        .add_all(pb::AddAllRequest { user: "ada".into(), titles: vec!["kept?".into(), String::new()] })
        .await
        .unwrap_err();
    assert_eq!(failed.code(), Code::InvalidArgument, "{failed:?}");
    assert!(list(&mut client, "ada").await.is_empty(), "the failed call's first todo was rolled back");
    let added = client
        .add_all(pb::AddAllRequest { user: "ada".into(), titles: vec!["a".into(), "b".into()] })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list(&mut client, "ada").await, added.todos);

    // Marked done, then failed: rolled back, and its `TodoCompleted` is not counted.
    let id = added.todos[0].id;
    let before = service.completed();
    let failed = client.complete(pb::CompleteRequest { user: "ada".into(), id, fail_after: true }).await.unwrap_err();
    assert_eq!((failed.code(), failed.message()), (Code::Internal, "failing on purpose"));
    assert!(!list(&mut client, "ada").await[0].done, "the failed call's change was rolled back");

    // The same call succeeding: kept, and counted.
    let done =
        client.complete(pb::CompleteRequest { user: "ada".into(), id, fail_after: false }).await.unwrap().into_inner();
    assert!(done.done);
    assert!(list(&mut client, "ada").await[0].done);
    // The successful call's event is handled, after the response; the failed call's never is
    // (the server's stop waits for every handler).
    let app = service.app.clone();
    service.stop().await;
    assert_eq!(app.get_object::<TodoStats>().unwrap().completed(), before + 1, "the failed call's event was dropped");
}

/// A streamed call: each todo a message, the status in the trailers after the last one. The
/// call's scope stays open until the stream has ended, and its end sees the status: 0 for a
/// stream that ran out, `ABORTED` (10) for one that failed part-way, after the messages it
/// sent; a unary call's error status, in its headers, is seen too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_ends_with_its_status_in_the_trailers_and_its_scope_sees_it() {
    let service = Service::start("stream").await;
    let mut client = service.client().await;
    for title in ["a", "b", "c"] {
        client.add(pb::AddRequest { user: "ada".into(), title: title.into() }).await.unwrap();
    }
    let watch = |fail_after: u32| pb::WatchRequest { user: "ada".into(), fail_after };
    let mut all = client.watch(watch(0)).await.unwrap().into_inner();
    let mut titles = Vec::new();
    while let Some(todo) = all.message().await.unwrap() {
        titles.push(todo.title);
    }
    assert_eq!(titles, ["a", "b", "c"]);
    let mut cut = client.watch(watch(2)).await.unwrap().into_inner();
    assert_eq!(cut.message().await.unwrap().unwrap().title, "a");
    assert_eq!(cut.message().await.unwrap().unwrap().title, "b");
    let failed = cut.message().await.unwrap_err();
    assert_eq!((failed.code(), failed.message()), (Code::Aborted, "the watch was cut short on purpose"));
    let invalid = client.add(pb::AddRequest { user: "ada".into(), title: " ".into() }).await.unwrap_err();
    assert_eq!(invalid.code(), Code::InvalidArgument);
    let log = service.app.get_object::<grpc_todos::CallLog>().unwrap();
    let watched = |ended: &[(String, Option<u16>)]| {
        let path = |p: &str| ended.iter().filter(|(path, _)| path == p).map(|(_, s)| *s).collect::<Vec<_>>();
        (path("/todos.v1.Todos/Watch"), path("/todos.v1.Todos/Add"))
    };
    let (watches, adds) = tegu_test_support::eventually(async || {
        let ended = log.ended();
        let (watches, adds) = watched(&ended);
        (watches.len() == 2 && adds.len() == 4).then_some((watches, adds))
    })
    .await;
    assert_eq!(watches, [Some(0), Some(10)]);
    assert_eq!(adds, [Some(0), Some(0), Some(0), Some(3)]);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_http_share_the_port() {
    let service = Service::start("port").await;
    let mut client = service.client().await;
    client.add(pb::AddRequest { user: "ada".into(), title: "over gRPC".into() }).await.unwrap();

    // HTTP/1.1 on the same address: the controllers, seeing what the gRPC call committed.
    let reply = send(service.addr, "GET", "/users/ada/todos", &[], b"").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.body.contains("over gRPC"), "{reply:?}");
    // An unknown path is still a 404, not gRPC's UNIMPLEMENTED.
    assert_eq!(send(service.addr, "GET", "/nope", &[], b"").await.status, 404);
    service.stop().await;
}
