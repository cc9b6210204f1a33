//! `ClusterSchedules`: two instances of a service (two Apps, each with its own pool) on one
//! database run each due time of a `once_per_cluster` job once, on SQLite and on PostgreSQL.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use tegu_core::{App, handlers, schedule::ScheduleLock, singleton_proto};
use tegu_sqlx::{ClusterSchedules, Database, Postgres, Sqlite};

/// A once-per-cluster job, counting its runs in this instance.
#[derive(Debug, Default)]
#[singleton_proto]
pub struct Purge {
    runs: AtomicUsize,
}

#[handlers]
impl Purge {
    #[schedule(every = "1s", once_per_cluster)]
    async fn purge(&self) {
        self.runs.fetch_add(1, Ordering::SeqCst);
    }
}

/// An instance of the service on `url`, on database `$db`.
macro_rules! instance {
    ($db:ty, $url:expr) => {
        App::builder()
            .link::<Database<$db>>()
            .link::<ClusterSchedules<$db>>()
            .config_value("database.url", $url)
            .build()
            .await
            .expect("the App builds")
    };
}

/// The tests, for database `$db` with fresh URLs from `$url`.
macro_rules! tests {
    ($db:ty, $url:path, $exclusive:ident, $each_once:ident) => {
        /// Each due run claimed by exactly one of two instances, claiming at once.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $exclusive() {
            let Some(url) = $url(stringify!($exclusive)).await else { return };
            let (a, b) = (instance!($db, &url), instance!($db, &url));
            let locks =
                [a.get_object::<ClusterSchedules<$db>>().unwrap(), b.get_object::<ClusterSchedules<$db>>().unwrap()];
            let start = SystemTime::now();
            let claims = (0..50u64).flat_map(|i| {
                let due = start + Duration::from_secs(i);
                locks.clone().map(|lock| async move { lock.claim("Purge::purge", due).await.unwrap() })
            });
            let won: Vec<bool> = futures_util::future::join_all(claims).await;
            for (i, pair) in won.chunks(2).enumerate() {
                assert_eq!(pair.iter().filter(|&&w| w).count(), 1, "due time {i}: {pair:?}");
            }
        }

        /// Two instances, a one-second job, three and a half seconds: each due time run once.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $each_once() {
            let Some(url) = $url(stringify!($each_once)).await else { return };
            let (a, b) = (instance!($db, &url), instance!($db, &url));
            tokio::time::sleep(Duration::from_millis(3500)).await;
            a.shutdown().await.unwrap();
            b.shutdown().await.unwrap();
            let runs: usize =
                [&a, &b].iter().map(|app| app.get_object::<Purge>().unwrap().runs.load(Ordering::SeqCst)).sum();
            let pool = sqlx::Pool::<$db>::connect(&url).await.unwrap();
            let (claimed,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM di_schedule_runs").fetch_one(&pool).await.unwrap();
            assert!(runs >= 3, "three due times at least: {runs}");
            assert_eq!(runs, usize::try_from(claimed).unwrap(), "one run per due time claimed");
        }
    };
}

tests!(Sqlite, common::urls::sqlite, sqlite_claims_are_exclusive, sqlite_instances_run_each_due_time_once);
tests!(Postgres, common::urls::postgres, postgres_claims_are_exclusive, postgres_instances_run_each_due_time_once);
