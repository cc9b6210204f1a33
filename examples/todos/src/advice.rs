//! The example's advices (`#[intercept]`), its event and its scheduled job.
//!
//! - [`Timing`]: logs each service call with its duration, inside the request's `tracing`
//!   span (`#[intercept(Timing)]` on `TodoService`'s impl block: every `pub async fn`).
//! - [`Transactional`]: runs a method in a savepoint of the request's unit of work, released
//!   on `Ok` and rolled back on `Err`: the method's writes are all or nothing, whatever the
//!   rest of the request does (`TodoService::create_all`, which `POST .../import` calls per
//!   batch).
//! - [`TodoCompleted`], handled by [`TodoStats`]: counts todos marked done, after the request
//!   that did it has committed (`GET /stats`).
//! - [`TodoPurger`]: every hour, deletes the todos done more than a day ago.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Json;
use di_core::{Advice, Call, ContextRef, Next, handlers, singleton_proto};
use di_http::{http_controller, http_routes};
use serde::Serialize;

use crate::db::{Db, DbError, UnitOfWork};

/// Logs how long each call took, inside the current `tracing` span (di-http's
/// `request{id=...}`).
#[singleton_proto]
#[derive(Debug)]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let started = Instant::now();
        let out = next.run().await;
        tracing::info!(call = %call, elapsed_us = started.elapsed().as_micros() as u64, "timed");
        out
    }
}

/// Runs a method in a savepoint of the request's unit of work: released (kept, to be committed
/// with the request) on `Ok`, rolled back on `Err`.
#[singleton_proto]
#[derive(Debug)]
pub struct Transactional {
    #[inject]
    uow: ContextRef<UnitOfWork>,
}

impl<T, E: From<DbError>> Advice<Result<T, E>> for Transactional {
    async fn around(&self, call: Call, next: Next<'_, Result<T, E>>) -> Result<T, E> {
        let uow = UnitOfWork::current(&self.uow)?;
        uow.write("opening a savepoint", |conn| conn.execute_batch("SAVEPOINT method")).await?;
        let out = next.run().await;
        let end = if out.is_ok() { "RELEASE method" } else { "ROLLBACK TO method; RELEASE method" };
        uow.write("closing a savepoint", |conn| conn.execute_batch(end)).await?;
        if out.is_err() {
            tracing::info!(call = %call, "rolled back to the method's savepoint");
        }
        out
    }
}

/// Emitted when a todo is marked done; handled once its request has committed.
#[derive(Debug, Clone)]
pub struct TodoCompleted {
    /// Whose todo.
    pub user: String,
    /// Which.
    pub id: i64,
}

/// Counts completed todos (`GET /stats`).
#[singleton_proto]
#[derive(Debug, Default)]
pub struct TodoStats {
    completed: AtomicU64,
}

#[handlers]
impl TodoStats {
    #[event_handler]
    async fn on_completed(&self, event: &TodoCompleted) {
        let total = self.completed.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(user = %event.user, id = event.id, total, "todo completed");
    }

    /// How many todos were completed since start.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }
}

/// The body of `GET /stats`.
#[derive(Debug, Serialize)]
pub struct StatsBody {
    /// Todos marked done since start (after their requests committed).
    pub completed: u64,
}

/// `/stats`.
#[http_controller]
#[derive(Debug)]
pub struct StatsController {
    #[inject]
    stats: Arc<TodoStats>,
}

#[http_routes]
impl StatsController {
    #[get("/stats")]
    async fn stats(&self) -> Json<StatsBody> {
        Json(StatsBody { completed: self.stats.completed() })
    }
}

/// Deletes the todos done more than a day ago, every hour.
#[singleton_proto]
#[derive(Debug)]
pub struct TodoPurger {
    #[inject]
    db: Arc<Db>,
}

/// How long a done todo is kept, in seconds.
pub const KEEP_DONE_SECS: i64 = 24 * 60 * 60;

#[handlers]
impl TodoPurger {
    /// The job; `App::run_schedule::<TodoPurger>("purge")` runs it by hand.
    #[schedule(every = "1h")]
    pub async fn purge(&self) -> Result<(), DbError> {
        let purged = self
            .db
            .with_writer(|conn| {
                conn.execute(
                    "DELETE FROM todos WHERE done = 1 AND done_at < unixepoch() - ?1",
                    rusqlite::params![KEEP_DONE_SECS],
                )
            })
            .await
            .map_err(DbError::new("purging done todos"))?;
        tracing::info!(purged, "purged the todos done more than a day ago");
        Ok(())
    }
}
