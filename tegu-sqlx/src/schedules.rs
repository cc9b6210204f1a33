//! `ClusterSchedules<DB>`: the runs of `#[schedule(.., once_per_cluster)]` jobs, claimed in a
//! table of the `database` data source, so that one instance of a service runs each due time.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tegu_core::error::BoxError;
use tegu_core::futures::BoxFuture;
use tegu_core::schedule::ScheduleLock;
use tegu_tx::TxError;

use crate::Database;

/// How long a claimed run is remembered: an instance whose timer is that late (a paused VM)
/// could claim it again.
const REMEMBERED: Duration = Duration::from_secs(7 * 24 * 3600);

/// The table, created when the App is built if it does not exist.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS di_schedule_runs (
    job TEXT NOT NULL,
    due BIGINT NOT NULL,
    PRIMARY KEY (job, due)
)";

/// Claims the runs of `#[schedule(.., once_per_cluster)]` jobs for the instances of a service
/// that share one database: each instance inserts the row (job, due time) into the table
/// `di_schedule_runs` when the run is due, and only the one whose insert added the row runs it.
/// A row outlives the run, so an instance whose timer fires a little later does not run the
/// same due time again once the first has finished (which a lock held only during the run
/// would allow). Rows older than a week are deleted as new ones are claimed.
///
/// Link it with the App, next to the `database` data source it uses:
/// `App::builder().link::<Database<Postgres>>().link::<ClusterSchedules<Postgres>>()`. It
/// provides `dyn tegu_core::schedule::ScheduleLock`; an App has at most one.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{handlers, singleton_proto, App};
/// use tegu_sqlx::{ClusterSchedules, Database, Sqlite};
///
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Purge { runs: AtomicUsize }
///
/// #[handlers]
/// impl Purge {
///     /// One instance of the service purges each hour, whichever claims it.
///     #[schedule(every = "1h", once_per_cluster)]
///     async fn purge(&self) {
///         self.runs.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .link::<Database<Sqlite>>()
///     .link::<ClusterSchedules<Sqlite>>()
///     .config_value("database.url", "sqlite::memory:")
///     .build()
///     .await?;
/// let claims = app.get_object::<ClusterSchedules<Sqlite>>()?;
/// use tegu_core::schedule::ScheduleLock;
/// let due = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(3600);
/// assert!(claims.claim("Purge::purge", due).await.unwrap()); // this instance runs it
/// assert!(!claims.claim("Purge::purge", due).await.unwrap()); // any other does not
/// # Ok(()) }
/// ```
pub struct ClusterSchedules<DB: sqlx::Database> {
    db: Arc<Database<DB>>,
}

impl<DB: sqlx::Database> std::fmt::Debug for ClusterSchedules<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSchedules").field("database", &self.db).finish()
    }
}

/// Milliseconds since the Unix epoch, as the table stores a due time.
fn millis(at: SystemTime) -> i64 {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// `ClusterSchedules<DB>` as a proto (object name `clusterSchedules`) on the `database` data
/// source, providing `dyn ScheduleLock`.
macro_rules! claims {
    ($db:ty, $build:ident, $as_lock:ident) => {
        crate::database::on_database!(ClusterSchedules<$db>, "clusterSchedules", dyn ScheduleLock, $build, $as_lock);

        impl ClusterSchedules<$db> {
            /// Claims in `db`, creating the table `di_schedule_runs` if it does not exist: for
            /// a service that builds its data source itself (choosing SQLite or PostgreSQL
            /// when it starts) and provides `dyn ScheduleLock` through its own singleton.
            ///
            /// # Errors
            ///
            /// [`TxError::Database`] if the table cannot be created.
            pub async fn new(db: Arc<Database<$db>>) -> Result<Self, TxError> {
                db.create_if_missing(TABLE, "creating the table di_schedule_runs").await?;
                Ok(ClusterSchedules { db })
            }
        }

        impl ScheduleLock for ClusterSchedules<$db> {
            fn claim<'a>(&'a self, job: &'a str, due: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
                Box::pin(async move {
                    let due = millis(due);
                    let claimed =
                        sqlx::query("INSERT INTO di_schedule_runs (job, due) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                            .bind(job)
                            .bind(due)
                            .execute(self.db.pool())
                            .await
                            .map_err(|e| self.db.error("claiming a scheduled run", e))?
                            .rows_affected()
                            == 1;
                    if claimed {
                        // Claimed: a failed clean-up must not cost the run (every instance now
                        // sees the row, so none other would run it).
                        let forgotten = due.saturating_sub(millis(SystemTime::UNIX_EPOCH + REMEMBERED));
                        let deleted = sqlx::query("DELETE FROM di_schedule_runs WHERE job = $1 AND due < $2")
                            .bind(job)
                            .bind(forgotten)
                            .execute(self.db.pool())
                            .await;
                        if let Err(error) = deleted {
                            tracing::warn!(%error, job, "forgetting old scheduled runs failed; the run goes on");
                        }
                    }
                    Ok(claimed)
                })
            }
        }
    };
}

#[cfg(feature = "sqlite")]
claims!(sqlx::Sqlite, build_sqlite, sqlite_as_lock);
#[cfg(feature = "postgres")]
claims!(sqlx::Postgres, build_postgres, postgres_as_lock);
