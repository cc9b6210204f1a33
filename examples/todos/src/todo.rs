//! Todos: the repository (SQL), the service (rules) and the controller (HTTP).

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, Request};
use axum::http::{StatusCode, header};
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tegu_core::{ContextRef, DiError, context_proto, events::EventBus, intercept, lineage::Tenant, singleton_proto};
use tegu_http::{RequestHead, http_controller, http_routes};
use tegu_tx::TxError;

use crate::advice::{Timing, TodoCompleted, TodoCreated};
use crate::db::{Db, unix_now};
use crate::on_db;

/// A todo of a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// Its id, unique across users.
    pub id: i64,
    /// What to do.
    pub title: String,
    /// Whether it is done.
    pub done: bool,
}

impl From<(i64, String, bool)> for Todo {
    fn from((id, title, done): (i64, String, bool)) -> Todo {
        Todo { id, title, done }
    }
}

/// The body of `POST /users/{user}/todos`.
#[derive(Debug, Deserialize)]
pub struct NewTodo {
    /// What to do: 1 to 200 characters.
    pub title: String,
}

/// The body of `PATCH /users/{user}/todos/{id}`.
#[derive(Debug, Deserialize)]
pub struct TodoPatch {
    /// Done or not.
    pub done: bool,
}

/// Per request: the request id and what the request did, logged when it ends.
#[context_proto(destroy = summary)]
#[derive(Debug)]
pub struct RequestTracer {
    #[inject]
    head: Arc<RequestHead>,
    events: std::sync::Mutex<Vec<String>>,
}

impl RequestTracer {
    /// Records an event of this request.
    pub fn event(&self, event: String) {
        tracing::debug!(request_id = %self.head.id(), "{event}");
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }

    /// The request id, for error bodies.
    pub fn request_id(&self) -> String {
        self.head.id().to_string()
    }

    async fn summary(&self) {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        tracing::info!(status = ?self.head.response_status(), events = ?*events, "request done");
    }
}

/// The todos table. Its statements run on the current transaction (the request's, once a
/// `#[transactional]` method of [`TodoService`] began it), else each on its own: a request
/// that only reads takes no write lock and waits for no writer.
///
/// Every statement is the current tenant's ([`crate::current_tenant`]: the request's `x-tenant`,
/// else `default`): a todo of another tenant is not there, even by its id.
#[singleton_proto]
#[derive(Debug)]
pub struct TodoRepository {
    #[inject]
    db: Arc<Db>,
    #[inject]
    tenant: ContextRef<Tenant>,
}

impl TodoRepository {
    /// The key of the tenant whose todos the current scope reads and writes.
    fn tenant(&self) -> Result<String, TodoError> {
        Ok(crate::current_tenant(&self.tenant)?.key().to_owned())
    }

    async fn list(&self, user: &str) -> Result<Vec<Todo>, TodoError> {
        let tenant = self.tenant()?;
        let rows: Vec<(i64, String, bool)> = on_db!(self.db.pools(), |db, conn| {
            sqlx::query_as("SELECT id, title, done FROM todos WHERE tenant = $1 AND \"user\" = $2 ORDER BY id")
                .bind(&tenant)
                .bind(user)
                .fetch_all(conn)
                .await
                .map_err(|e| db.error("listing todos", e))?
        });
        Ok(rows.into_iter().map(Todo::from).collect())
    }

    async fn get(&self, user: &str, id: i64) -> Result<Option<Todo>, TodoError> {
        let tenant = self.tenant()?;
        let row: Option<(i64, String, bool)> = on_db!(self.db.pools(), |db, conn| {
            sqlx::query_as("SELECT id, title, done FROM todos WHERE tenant = $1 AND \"user\" = $2 AND id = $3")
                .bind(&tenant)
                .bind(user)
                .bind(id)
                .fetch_optional(conn)
                .await
                .map_err(|e| db.error("reading a todo", e))?
        });
        Ok(row.map(Todo::from))
    }

    async fn insert(&self, user: &str, title: &str) -> Result<Todo, TodoError> {
        let tenant = self.tenant()?;
        let id: i64 = on_db!(self.db.pools(), |db, conn| {
            sqlx::query_scalar("INSERT INTO todos (tenant, \"user\", title) VALUES ($1, $2, $3) RETURNING id")
                .bind(&tenant)
                .bind(user)
                .bind(title)
                .fetch_one(conn)
                .await
                .map_err(|e| db.error("inserting a todo", e))?
        });
        Ok(Todo { id, title: title.to_owned(), done: false })
    }

    /// Marks a todo done or not: `None` if there is no such todo, else whether it changed (a
    /// todo already in that state is left as it is, its `done_at` included).
    async fn set_done(&self, user: &str, id: i64, done: bool) -> Result<Option<bool>, TodoError> {
        let tenant = self.tenant()?;
        let done_at = done.then(unix_now);
        on_db!(self.db.pools(), |db, conn| {
            let changed = sqlx::query(
                "UPDATE todos SET done = $4, done_at = $5 WHERE tenant = $1 AND \"user\" = $2 AND id = $3 AND done != $4",
            )
            .bind(&tenant)
            .bind(user)
            .bind(id)
            .bind(done)
            .bind(done_at)
            .execute(&mut *conn)
            .await
            .map_err(|e| db.error("updating a todo", e))?;
            if changed.rows_affected() == 1 {
                return Ok(Some(true));
            }
            let exists: Option<i64> =
                sqlx::query_scalar("SELECT id FROM todos WHERE tenant = $1 AND \"user\" = $2 AND id = $3")
                    .bind(&tenant)
                    .bind(user)
                    .bind(id)
                    .fetch_optional(conn)
                    .await
                    .map_err(|e| db.error("reading a todo", e))?;
            Ok(exists.map(|_| false))
        })
    }

    async fn delete(&self, user: &str, id: i64) -> Result<bool, TodoError> {
        let tenant = self.tenant()?;
        on_db!(self.db.pools(), |db, conn| {
            let deleted = sqlx::query("DELETE FROM todos WHERE tenant = $1 AND \"user\" = $2 AND id = $3")
                .bind(&tenant)
                .bind(user)
                .bind(id)
                .execute(conn)
                .await
                .map_err(|e| db.error("deleting a todo", e))?;
            Ok(deleted.rows_affected() == 1)
        })
    }
}

/// What can go wrong, as the API answers it.
#[derive(Debug, thiserror::Error)]
pub enum TodoError {
    /// The input breaks a rule.
    #[error("{0}")]
    Invalid(String),
    /// No such todo for this user.
    #[error("todo {0} not found")]
    NotFound(i64),
    /// No such user.
    #[error("no user {0:?}")]
    UnknownUser(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] TxError),
    /// The request's scope could not be read (its tenant): it ended, or is another App's.
    #[error(transparent)]
    Scope(#[from] DiError),
}

/// A [`TodoError`] answered with its status and a JSON body naming the request.
#[derive(Debug)]
pub struct ApiError {
    error: TodoError,
    request_id: String,
}

/// The JSON body of an error.
#[derive(Serialize)]
struct ErrorBody {
    error: String,
    request_id: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // A database's errors are logged, not answered: they name tables, statements and hosts.
        let (status, error) = match self.error {
            TodoError::Invalid(_) => (StatusCode::BAD_REQUEST, self.error.to_string()),
            TodoError::NotFound(_) | TodoError::UnknownUser(_) => (StatusCode::NOT_FOUND, self.error.to_string()),
            TodoError::Db(ref err @ TxError::Busy { .. }) => {
                tracing::warn!(%err, request_id = %self.request_id, "database busy");
                (StatusCode::SERVICE_UNAVAILABLE, "the service is busy; try again shortly".to_owned())
            }
            TodoError::Db(ref err) => {
                tracing::error!(%err, request_id = %self.request_id, "database error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error".to_owned())
            }
            TodoError::Scope(ref err) => {
                tracing::error!(%err, request_id = %self.request_id, "the request's scope could not be read");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error".to_owned())
            }
        };
        let mut response = (status, Json(ErrorBody { error, request_id: self.request_id })).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

/// Who the users are. In a real deployment, an account service; tests replace it with a fake
/// (`AppBuilder::override_provider::<dyn Users>`).
pub trait Users: Send + Sync + std::fmt::Debug {
    /// Whether `user` exists.
    fn exists(&self, user: &str) -> bool;
}

/// Every well-formed name is a user: 1 to 64 letters, digits, `-` or `_`.
#[singleton_proto(provides(dyn Users))]
#[derive(Debug)]
pub struct OpenUsers;

impl Users for OpenUsers {
    fn exists(&self, user: &str) -> bool {
        (1..=64).contains(&user.len()) && user.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_')
    }
}

/// The rules: the user exists; titles are 1 to 200 characters; a batch is saved whole or not
/// at all. The methods that write are `#[transactional]`: the first begins the request's
/// transaction, which the request commits in its completion phase (or rolls back if it fails).
#[singleton_proto]
#[derive(Debug)]
pub struct TodoService {
    #[inject]
    users: Arc<dyn Users>,
    #[inject]
    repo: Arc<TodoRepository>,
    #[inject]
    tracer: ContextRef<RequestTracer>,
    #[inject]
    events: Arc<EventBus>,
}

/// Every `pub async fn` is timed ([`Timing`]).
#[intercept(Timing)]
impl TodoService {
    fn check_user<'u>(&self, user: &'u str) -> Result<&'u str, TodoError> {
        if self.users.exists(user) { Ok(user) } else { Err(TodoError::UnknownUser(user.to_owned())) }
    }

    fn check_title(title: &str) -> Result<&str, TodoError> {
        let title = title.trim();
        match title.chars().count() {
            0 => Err(TodoError::Invalid("a title cannot be empty".into())),
            1..=200 => Ok(title),
            n => Err(TodoError::Invalid(format!("a title has at most 200 characters, not {n}"))),
        }
    }

    /// Adds one todo.
    #[transactional]
    pub async fn create(&self, user: &str, title: &str) -> Result<Todo, TodoError> {
        let todo = self.insert(user, title).await?;
        self.events.emit(TodoCreated { user: user.to_owned(), id: todo.id });
        Ok(todo)
    }

    /// Adds several todos: every one, or (on the first invalid title) none: the method runs in
    /// a savepoint of the request's transaction (`nested`), rolled back to on `Err`. The events
    /// are emitted once every todo is written: an event follows the request, not the savepoint,
    /// so one emitted before a rollback to the savepoint would still go out with the request.
    #[transactional(nested)]
    pub async fn create_all(&self, user: &str, titles: &[NewTodo]) -> Result<Vec<Todo>, TodoError> {
        let mut created = Vec::with_capacity(titles.len());
        for new in titles {
            created.push(self.insert(user, &new.title).await?);
        }
        for todo in &created {
            self.events.emit(TodoCreated { user: user.to_owned(), id: todo.id });
        }
        Ok(created)
    }

    /// Writes one todo, checked, in the current transaction; emits nothing.
    async fn insert(&self, user: &str, title: &str) -> Result<Todo, TodoError> {
        let todo = self.repo.insert(self.check_user(user)?, Self::check_title(title)?).await?;
        self.tracer.get().event(format!("created todo {} for {user}", todo.id));
        Ok(todo)
    }

    /// The todos of `user`, oldest first.
    pub async fn list(&self, user: &str) -> Result<Vec<Todo>, TodoError> {
        self.repo.list(self.check_user(user)?).await
    }

    /// One todo.
    pub async fn get(&self, user: &str, id: i64) -> Result<Todo, TodoError> {
        self.repo.get(self.check_user(user)?, id).await?.ok_or(TodoError::NotFound(id))
    }

    /// Marks a todo done or not. Marking it as it is already changes nothing and emits nothing
    /// (a client's retry does not count twice).
    #[transactional]
    pub async fn set_done(&self, user: &str, id: i64, done: bool) -> Result<Todo, TodoError> {
        let changed = self.repo.set_done(self.check_user(user)?, id, done).await?.ok_or(TodoError::NotFound(id))?;
        if changed {
            self.tracer.get().event(format!("todo {id} done={done}"));
            if done {
                // Held until the request has committed; to no `after_commit` handler if it fails.
                self.events.emit(TodoCompleted { user: user.to_owned(), id });
            }
        }
        self.get(user, id).await
    }

    /// Deletes a todo.
    #[transactional]
    pub async fn delete(&self, user: &str, id: i64) -> Result<(), TodoError> {
        if !self.repo.delete(self.check_user(user)?, id).await? {
            return Err(TodoError::NotFound(id));
        }
        self.tracer.get().event(format!("deleted todo {id}"));
        Ok(())
    }

    fn api_error(&self, error: TodoError) -> ApiError {
        ApiError { error, request_id: self.tracer.get().request_id() }
    }
}

/// Logs how long each todo request took (per-controller middleware).
async fn timing(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let response = next.run(req).await;
    tracing::info!(status = response.status().as_u16(), elapsed_us = started.elapsed().as_micros() as u64, "answered");
    response
}

/// `/users/{user}/todos`: the todos of one user.
#[http_controller(path = "/users/{user}/todos")]
#[middleware(from_fn(timing))]
#[derive(Debug)]
pub struct TodoController {
    #[inject]
    service: Arc<TodoService>,
}

type ApiResult<T> = Result<T, ApiError>;

/// The answer of `POST /users/{user}/todos/import`.
#[derive(Debug, Default, Serialize)]
pub struct ImportReport {
    /// The todos of the batches that were saved.
    pub saved: Vec<Todo>,
    /// The batches that were rolled back.
    pub failed: Vec<BatchError>,
}

/// A batch of an import that was rolled back.
#[derive(Debug, Serialize)]
pub struct BatchError {
    /// Its position, from 0.
    pub batch: usize,
    /// Why.
    pub error: String,
}

#[http_routes]
impl TodoController {
    #[get("/")]
    async fn list(&self, Path(user): Path<String>) -> ApiResult<Json<Vec<Todo>>> {
        self.service.list(&user).await.map(Json).map_err(|e| self.service.api_error(e))
    }

    #[post("/")]
    async fn create(&self, Path(user): Path<String>, Json(new): Json<NewTodo>) -> ApiResult<(StatusCode, Json<Todo>)> {
        let todo = self.service.create(&user, &new.title).await.map_err(|e| self.service.api_error(e))?;
        Ok((StatusCode::CREATED, Json(todo)))
    }

    /// All or nothing: one invalid title and none is saved.
    #[post("/batch")]
    async fn create_all(
        &self,
        Path(user): Path<String>,
        Json(new): Json<Vec<NewTodo>>,
    ) -> ApiResult<(StatusCode, Json<Vec<Todo>>)> {
        let todos = self.service.create_all(&user, &new).await.map_err(|e| self.service.api_error(e))?;
        Ok((StatusCode::CREATED, Json(todos)))
    }

    /// Several batches, each all or nothing: a batch with an invalid title is rolled back, the
    /// others are saved. Answers what was saved and what failed.
    #[post("/import")]
    async fn import(&self, Path(user): Path<String>, Json(batches): Json<Vec<Vec<NewTodo>>>) -> Json<ImportReport> {
        let mut report = ImportReport::default();
        for (batch, titles) in batches.iter().enumerate() {
            match self.service.create_all(&user, titles).await {
                Ok(todos) => report.saved.extend(todos),
                Err(error) => report.failed.push(BatchError { batch, error: error.to_string() }),
            }
        }
        Json(report)
    }

    #[get("/{id}")]
    async fn get(&self, Path((user, id)): Path<(String, i64)>) -> ApiResult<Json<Todo>> {
        self.service.get(&user, id).await.map(Json).map_err(|e| self.service.api_error(e))
    }

    #[patch("/{id}")]
    async fn patch(
        &self,
        Path((user, id)): Path<(String, i64)>,
        Json(patch): Json<TodoPatch>,
    ) -> ApiResult<Json<Todo>> {
        self.service.set_done(&user, id, patch.done).await.map(Json).map_err(|e| self.service.api_error(e))
    }

    #[delete("/{id}")]
    async fn delete(&self, Path((user, id)): Path<(String, i64)>) -> ApiResult<StatusCode> {
        self.service.delete(&user, id).await.map(|()| StatusCode::NO_CONTENT).map_err(|e| self.service.api_error(e))
    }
}
