//! The example's advice (`#[intercept]`), its event and its scheduled job.
//!
//! - [`Timing`]: logs each service call with its duration, inside the request's `tracing`
//!   span (`#[intercept(Timing)]` on `TodoService`'s impl block: every `pub async fn`). The
//!   transactions are tegu-tx's `#[transactional]` advice, on the methods that write.
//! - [`TodoCreated`] and [`TodoCompleted`], handled by [`TodoStats`]: count todos created and
//!   marked done, after the request that did it has committed (`GET /stats`). Both are external
//!   events: with NATS configured they go through the outbox, and every instance counts each
//!   once.
//! - [`TodoPurger`]: every hour, deletes the todos done more than a day ago; with several
//!   instances on one database, one of them does (`once_per_cluster`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Json;
use serde::{Deserialize, Serialize};
use tegu_core::{
    advice::{Advice, Call, Next},
    handlers, singleton_proto,
};
use tegu_http::{http_controller, http_routes};

use tegu_tx::TxError;

use crate::db::{Db, unix_now};
use crate::on_db;

/// Logs how long each call took, inside the current `tracing` span (tegu-http's
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

/// Emitted when a todo is marked done; handled once its request has committed. External: with
/// NATS configured (`TODOS_NATS__URL`), it goes through the outbox to every instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TodoCompleted {
    /// Whose todo.
    pub user: String,
    /// Which.
    pub id: i64,
}

tegu_outbox::external_event!(TodoCompleted = "todos.completed");

/// Emitted when a todo is created; handled once its request has committed. External too.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TodoCreated {
    /// Whose todo.
    pub user: String,
    /// Which.
    pub id: i64,
}

tegu_outbox::external_event!(TodoCreated = "todos.created");

/// Counts created and completed todos (`GET /stats`): in each instance, every todo of the
/// service once, wherever it was created or completed.
#[singleton_proto]
#[derive(Debug, Default)]
pub struct TodoStats {
    created: AtomicU64,
    completed: AtomicU64,
}

#[handlers]
impl TodoStats {
    #[event_handler]
    async fn on_created(&self, _event: &TodoCreated) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    #[event_handler]
    async fn on_completed(&self, event: &TodoCompleted) {
        let total = self.completed.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(user = ?event.user, id = event.id, total, "todo completed");
    }

    /// How many todos were created since start.
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// How many todos were completed since start.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }
}

/// The body of `GET /stats`.
#[derive(Debug, Serialize, Deserialize)]
pub struct StatsBody {
    /// Todos created since start (after their requests committed).
    pub created: u64,
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
        Json(StatsBody { created: self.stats.created(), completed: self.stats.completed() })
    }
}

/// Deletes the todos done more than a day ago, every hour (`[purge] every` sets another period):
/// in one instance of the service, whichever claims the due time (`once_per_cluster`, claimed
/// through [`Db`]).
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
    #[schedule(every = "1h", once_per_cluster, config = "purge.every")]
    pub async fn purge(&self) -> Result<(), TxError> {
        let before = unix_now() - KEEP_DONE_SECS;
        let purged = on_db!(self.db.pools(), |db, conn| {
            sqlx::query("DELETE FROM todos WHERE done AND done_at < $1")
                .bind(before)
                .execute(conn)
                .await
                .map_err(|e| db.error("purging done todos", e))?
                .rows_affected()
        });
        tracing::info!(purged, "purged the todos done more than a day ago");
        Ok(())
    }
}
