//! The example's advice (`#[intercept]`), its event and its scheduled job.
//!
//! - [`Timing`]: logs each service call with its duration, inside the request's `tracing`
//!   span (`#[intercept(Timing)]` on `TodoService`'s impl block: every `pub async fn`). The
//!   transactions are tegu-tx's `#[transactional]` advice, on the methods that write.
//! - [`TodoCreated`] and [`TodoCompleted`], handled by [`TodoStats`]: count todos created and
//!   marked done, in all and per tenant, after the request that did it has committed
//!   (`GET /stats`; with `x-tenant`, the tenant's counts too). Both are external events: with
//!   NATS configured they go through the outbox, and every instance counts each once.
//!
//!   Each handler runs in a scope of its own, seeded with the *lineage* of the request that
//!   emitted the event (in another instance too: the outbox stores it as the event's headers):
//!   its `ContextRef<Tenant>` reads that request's tenant, and its span, `event handler{..}`,
//!   has the request's `tenant`, `trace_id` and `request_id` as fields, which its log line
//!   carries:
//!
//!   ```text
//!   INFO event handler{event="todos::advice::TodoCompleted" handler=todos::advice::TodoStats::on_completed tenant="acme" trace_id="4bf92f3577b34da6a3ce929d0e0e4736" request_id="1-1"}: todos::advice: todo completed counted todo=7
//!   ```
//! - [`TodoPurger`]: every hour, deletes the todos done more than a day ago, of every tenant (a
//!   job serves none); with several instances on one database, one of them does
//!   (`once_per_cluster`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Json;
use serde::{Deserialize, Serialize};
use tegu_core::{
    ContextRef, DiError,
    advice::{Advice, Call, Next},
    handlers,
    lineage::Tenant,
    singleton_proto,
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

// Keyed by the user: the notifier, once per cluster, handles a user's completions in the order
// they committed.
tegu_outbox::external_event!(TodoCompleted = "todos.completed", key = |done| done.user.clone());

/// Emitted when a todo is created; handled once its request has committed. External too.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TodoCreated {
    /// Whose todo.
    pub user: String,
    /// Which.
    pub id: i64,
}

tegu_outbox::external_event!(TodoCreated = "todos.created");

/// Tells a todo's owner it is done: once in the whole service, whichever instance does it
/// (`once_per_cluster`: with NATS, the instances share one subscription for this handler, and
/// one that dies mid-handling leaves the event to another). The notification is a row of the
/// `notifications` table, written in the handler's transaction (`#[transactional]`), which the
/// outbox's inbox record joins: the row and the record commit together, so that a redelivery,
/// a retry or a replay never writes it twice. A notification sent outside the database (a
/// mail) would carry its key, the event's id ([`tegu_outbox::EventId`]), for the mail server to
/// recognise a repeat by.
#[singleton_proto]
#[derive(Debug)]
pub struct Notifier {
    #[inject]
    db: Arc<Db>,
    #[inject]
    tenant: ContextRef<Tenant>,
}

#[handlers]
impl Notifier {
    #[event_handler(once_per_cluster)]
    async fn on_completed(&self, event: &TodoCompleted) -> Result<(), TxError> {
        self.notify(event).await
    }
}

impl Notifier {
    /// Writes the notification of `event`, keyed by the event's id (by the todo, for an event
    /// that stayed in the process, without the outbox).
    #[tegu_tx::transactional]
    async fn notify(&self, event: &TodoCompleted) -> Result<(), TxError> {
        let tenant =
            self.tenant.try_get().map(|t| t.key().to_owned()).unwrap_or_else(|_| crate::DEFAULT_TENANT.to_owned());
        let key = match tegu_outbox::EventId::current() {
            Some(id) => id.to_string(),
            None => format!("local:{tenant}:{}", event.id),
        };
        on_db!(self.db.pools(), |db, conn| {
            sqlx::query("INSERT INTO notifications (key, tenant, \"user\", todo, at) VALUES ($1, $2, $3, $4, $5)")
                .bind(&key)
                .bind(&tenant)
                .bind(&event.user)
                .bind(event.id)
                .bind(unix_now())
                .execute(conn)
                .await
                .map_err(|e| db.error("writing a notification", e))?;
        });
        tracing::info!(todo = event.id, "todo's owner notified");
        Ok(())
    }
}

/// Counts created and completed todos (`GET /stats`): in each instance, every todo of the
/// service once, wherever it was created or completed; in all, and per tenant (the tenant of
/// the request that emitted the event, read in the handler's scope; [`crate::DEFAULT_TENANT`]
/// for a request that named none).
#[singleton_proto]
#[derive(Debug)]
pub struct TodoStats {
    created: AtomicU64,
    completed: AtomicU64,
    /// Per tenant key: (created, completed).
    by_tenant: Mutex<HashMap<String, (u64, u64)>>,
    #[inject]
    tenant: ContextRef<Tenant>,
}

#[handlers]
impl TodoStats {
    #[event_handler]
    async fn on_created(&self, event: &TodoCreated) -> Result<(), DiError> {
        let tenant = crate::current_tenant(&self.tenant)?;
        self.created.fetch_add(1, Ordering::Relaxed);
        self.count(&tenant, |(created, _)| *created += 1);
        tracing::info!(todo = event.id, "todo created counted");
        Ok(())
    }

    #[event_handler]
    async fn on_completed(&self, event: &TodoCompleted) -> Result<(), DiError> {
        let tenant = crate::current_tenant(&self.tenant)?;
        self.completed.fetch_add(1, Ordering::Relaxed);
        self.count(&tenant, |(_, completed)| *completed += 1);
        tracing::info!(todo = event.id, "todo completed counted");
        Ok(())
    }

    /// Counts for `tenant` (its created and completed todos).
    fn count(&self, tenant: &Tenant, add: impl FnOnce(&mut (u64, u64))) {
        let mut counts = self.by_tenant.lock().unwrap_or_else(|e| e.into_inner());
        add(counts.entry(tenant.key().to_owned()).or_default());
    }

    /// How many todos were created since start.
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// How many todos were completed since start.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// How many todos of `tenant` were created and completed since start.
    pub fn of_tenant(&self, tenant: &Tenant) -> TenantStats {
        let counts = self.by_tenant.lock().unwrap_or_else(|e| e.into_inner());
        let (created, completed) = counts.get(tenant.key()).copied().unwrap_or_default();
        TenantStats { key: tenant.key().to_owned(), created, completed }
    }
}

/// The body of `GET /stats`: the counts of every tenant, and, for a request that names its
/// tenant (`x-tenant: acme`), that tenant's:
///
/// ```json
/// {"created":5,"completed":2,"tenant":{"key":"acme","created":1,"completed":1}}
/// ```
///
/// A request without `x-tenant` gets the counts of every tenant alone, as before tenants
/// (`{"created":5,"completed":2}`); `x-tenant: default` gives those of the requests that named
/// none.
#[derive(Debug, Serialize, Deserialize)]
pub struct StatsBody {
    /// Todos created since start (after their requests committed), of every tenant.
    pub created: u64,
    /// Todos marked done since start (after their requests committed), of every tenant.
    pub completed: u64,
    /// The counts of the request's tenant, if it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantStats>,
}

/// One tenant's counts, in [`StatsBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantStats {
    /// The tenant's key.
    pub key: String,
    /// Its todos created since start.
    pub created: u64,
    /// Its todos marked done since start.
    pub completed: u64,
}

/// `/stats`.
#[http_controller]
#[derive(Debug)]
pub struct StatsController {
    #[inject]
    stats: Arc<TodoStats>,
    #[inject]
    tenant: ContextRef<Tenant>,
}

#[http_routes]
impl StatsController {
    #[get("/stats")]
    async fn stats(&self) -> Json<StatsBody> {
        // Only a tenant the request named: none (not `default`) without `x-tenant`.
        let tenant = self.tenant.try_get().ok().map(|tenant| self.stats.of_tenant(&tenant));
        Json(StatsBody { created: self.stats.created(), completed: self.stats.completed(), tenant })
    }
}

/// Deletes the todos done more than a day ago, of every tenant, every hour (`[purge] every` sets another period):
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
