//! The todo example over gRPC: a tonic service in the same App as the HTTP API, served by the
//! same tegu-http [`Server`](tegu_http::Server) on the same port.
//!
//! - [`GrpcTodos`] (a singleton) implements the generated [`pb::todos_server::Todos`] on
//!   [`todos::todo::TodoService`], as the HTTP controller does.
//! - [`router`] merges its routes ([`grpc_router`]) beside the controllers'
//!   ([`tegu_http::RouterBuilder::merge`]): **each call runs in its own context scope**, as an
//!   HTTP request does (a `RequestHead`, the completion phase, destroy hooks), so it has its own
//!   transaction (tegu-tx's, begun by `TodoService`'s `#[transactional]` methods): committed
//!   when the call succeeds.
//! - **An error status fails the call** as a 4xx or 5xx fails an HTTP request: a failed tonic
//!   call answers HTTP 200 with a `grpc-status` other than 0 in its headers, which tegu-http reads
//!   before the completion phase: the transaction rolls back what the call wrote, and the
//!   events it emitted ([`todos::advice::TodoCompleted`]) go to no `after_commit` handler.
//! - **One port** for both: tegu-http's `Server` serves HTTP/1.1 and HTTP/2 without TLS (h2c,
//!   "prior knowledge", what gRPC clients speak), so `curl` and a gRPC client reach the same
//!   address.
//!
//! `cargo run -p example-grpc` serves it on 127.0.0.1:7002 (`GRPC_ADDR` to change it), the
//! database as `examples/todos/config/todos.toml` says (`TODOS_DB__PATH` or `TODOS_DB__URL`
//! override it).
//! `cargo test -p example-grpc` calls it with tonic's generated client over a real socket.

use std::sync::{Arc, Mutex};

use tegu_core::{App, ContextRef, DiError, context_proto, singleton_proto};
use tegu_http::RequestHead;
use todos::todo::{Todo, TodoError, TodoService};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

/// The code generated from `proto/todos.proto`: messages, the `Todos` server and client.
#[allow(missing_docs, unreachable_pub, missing_debug_implementations, clippy::all)]
pub mod pb {
    tonic::include_proto!("todos.v1");
}

use pb::todos_server::{Todos, TodosServer};

/// The `todos.v1.Todos` gRPC service, on the example's [`TodoService`].
#[singleton_proto]
#[derive(Debug)]
pub struct GrpcTodos {
    #[inject]
    service: Arc<TodoService>,
    #[inject]
    call: ContextRef<CallEnd>,
}

/// How each call ended, newest last: its path and its `grpc-status`, read from the response's
/// headers (a unary call's) or its trailers (a streamed call's, after its last message).
#[singleton_proto]
#[derive(Debug, Default)]
pub struct CallLog {
    ended: Mutex<Vec<(String, Option<u16>)>>,
}

impl CallLog {
    /// The calls that ended so far.
    pub fn ended(&self) -> Vec<(String, Option<u16>)> {
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Per call: records in the [`CallLog`], when the call's scope ends (after a streamed
/// response's last frame), how it ended.
#[context_proto(destroy = record)]
#[derive(Debug)]
pub struct CallEnd {
    #[inject]
    head: Arc<RequestHead>,
    #[inject]
    log: Arc<CallLog>,
}

impl CallEnd {
    async fn record(&self) {
        let ended = (self.head.uri().path().to_owned(), self.head.grpc_status());
        self.log.ended.lock().unwrap_or_else(|e| e.into_inner()).push(ended);
    }
}

impl From<Todo> for pb::TodoReply {
    fn from(todo: Todo) -> Self {
        pb::TodoReply { id: todo.id, title: todo.title, done: todo.done }
    }
}

fn list_reply(todos: Vec<Todo>) -> pb::ListReply {
    pb::ListReply { todos: todos.into_iter().map(Into::into).collect() }
}

/// A [`TodoError`] as a gRPC status: a broken rule is `INVALID_ARGUMENT`, a missing todo or
/// user `NOT_FOUND`; anything else is logged and answered `INTERNAL` with a generic message.
fn status(error: TodoError) -> Status {
    match error {
        TodoError::Invalid(_) => Status::invalid_argument(error.to_string()),
        TodoError::NotFound(_) | TodoError::UnknownUser(_) => Status::not_found(error.to_string()),
        other => {
            tracing::error!(error = %other, "todo call failed");
            Status::internal("internal error")
        }
    }
}

/// The todos a `Watch` call streams.
type TodoStream = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<pb::TodoReply, Status>> + Send>>;

#[tonic::async_trait]
impl Todos for GrpcTodos {
    type WatchStream = TodoStream;

    /// The user's todos, one message each; after `fail_after` of them (if not 0), an
    /// `ABORTED` status, which tonic sends in the trailers.
    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<TodoStream>, Status> {
        drop(self.call.get()); // the call's end is recorded
        let pb::WatchRequest { user, fail_after } = request.into_inner();
        let todos = self.service.list(&user).await.map_err(status)?;
        let mut items: Vec<Result<pb::TodoReply, Status>> = todos.into_iter().map(|t| Ok(t.into())).collect();
        if fail_after > 0 {
            items.truncate(fail_after as usize);
            items.push(Err(Status::aborted("the watch was cut short on purpose")));
        }
        Ok(Response::new(Box::pin(futures_util::stream::iter(items))))
    }

    async fn add(&self, request: Request<pb::AddRequest>) -> Result<Response<pb::TodoReply>, Status> {
        drop(self.call.get()); // the call's end is recorded
        let pb::AddRequest { user, title } = request.into_inner();
        let todo = self.service.create(&user, &title).await.map_err(status)?;
        Ok(Response::new(todo.into()))
    }

    async fn list(&self, request: Request<pb::ListRequest>) -> Result<Response<pb::ListReply>, Status> {
        let todos = self.service.list(&request.into_inner().user).await.map_err(status)?;
        Ok(Response::new(list_reply(todos)))
    }

    /// One `create` after the other in the call's unit of work (not `create_all`'s savepoint):
    /// the first invalid title fails the call, and its error status rolls back the others.
    async fn add_all(&self, request: Request<pb::AddAllRequest>) -> Result<Response<pb::ListReply>, Status> {
        let pb::AddAllRequest { user, titles } = request.into_inner();
        let mut created = Vec::with_capacity(titles.len());
        for title in &titles {
            created.push(self.service.create(&user, title).await.map_err(status)?);
        }
        Ok(Response::new(list_reply(created)))
    }

    async fn complete(&self, request: Request<pb::CompleteRequest>) -> Result<Response<pb::TodoReply>, Status> {
        let pb::CompleteRequest { user, id, fail_after } = request.into_inner();
        let todo = self.service.set_done(&user, id, true).await.map_err(status)?;
        if fail_after {
            return Err(Status::internal("failing on purpose"));
        }
        Ok(Response::new(todo.into()))
    }
}

/// The routes of the gRPC service (`/todos.v1.Todos/*`), to merge beside the controllers'.
///
/// Only the service's own path: unlike `tonic::service::Routes`, no fallback answering every
/// other path with gRPC's `UNIMPLEMENTED`, so an unknown HTTP path still answers 404.
///
/// # Errors
///
/// [`DiError`] if the App has no [`GrpcTodos`].
pub fn grpc_router(app: &App) -> Result<axum::Router, DiError> {
    let server = TodosServer::from_arc(app.get_object::<GrpcTodos>()?);
    let path = format!("/{}/{{*method}}", TodosServer::<GrpcTodos>::NAME);
    Ok(axum::Router::new().route_service(&path, server))
}

/// The router of the whole service: the example's controllers and the gRPC service, every
/// request and call in its own context scope.
///
/// # Errors
///
/// [`DiError`] if the App has no [`GrpcTodos`]; [`tegu_http::RouteError`] if routes clash.
pub fn router(app: &App) -> Result<axum::Router, Box<dyn std::error::Error>> {
    Ok(tegu_http::RouterBuilder::new(app).merge(grpc_router(app)?).build()?)
}
