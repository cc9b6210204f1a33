//! Health checks: singletons that `provides(dyn HealthCheck)` say whether what they depend on
//! answers (a database, a broker). `App::health` runs them concurrently, each within its
//! timeout, and keeps the results for a short while so that probes cannot stampede a database.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::erased::UnitFuture;
use crate::runtime::{AppInner, Handle, Handles};

// What the App reports of its health, as `App::health` and `App::state` return it.
pub use crate::app::{AppState, HealthReport};

/// A check of something the App needs, run by [`App::health`](crate::App::health) (tegu-http:
/// `GET /health/ready`). A singleton declares it with `provides(dyn HealthCheck)`; the check is
/// named after the proto (its `name`).
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use tegu_core::{App, futures::UnitFuture, health::HealthCheck, singleton_proto};
///
/// #[singleton_proto(name = "database", provides(dyn HealthCheck))]
/// #[derive(Default)]
/// pub struct Db { gone: AtomicBool }
///
/// impl HealthCheck for Db {
///     fn check(self: Arc<Self>) -> UnitFuture {
///         Box::pin(async move {
///             if self.gone.load(Ordering::Relaxed) { Err("the database file is gone".into()) } else { Ok(()) }
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().health_cache(std::time::Duration::ZERO).build().await?;
/// assert!(app.health().await.ready);
/// app.get_object::<Db>()?.gone.store(true, Ordering::Relaxed);
/// let report = app.health().await;
/// assert!(!report.ready && report.live);
/// assert_eq!(report.checks[0].name, "database");
/// # Ok(()) }
/// ```
pub trait HealthCheck: Send + Sync + 'static {
    /// `Ok` if healthy. An error, a panic or running past [`timeout`](Self::timeout) fails it.
    fn check(self: Arc<Self>) -> UnitFuture;

    /// How long the check may take. Default: 2 seconds.
    fn timeout(&self) -> Duration {
        DEFAULT_TIMEOUT
    }
}

/// [`HealthCheck::timeout`]'s default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// The result of one health check.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckReport {
    /// The check's proto name.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// How long it took (up to its timeout).
    pub took: Duration,
    /// Why it failed. Logged; tegu-http's probes do not send it (an error can name a host, a
    /// path or a user).
    pub error: Option<String>,
}

/// The App's checks and their last results.
pub(crate) struct Checks {
    list: Vec<(String, Arc<dyn HealthCheck>)>,
    ttl: Duration,
    /// The last results and when they were taken; the lock also makes concurrent probes wait
    /// for one run instead of each running the checks.
    last: tokio::sync::Mutex<Option<(Instant, Arc<[CheckReport]>)>>,
}

/// Puts the checks (each proto's label and object) in their handle; results are reused for `ttl`.
pub(crate) fn install(handles: &mut Handles, list: Vec<(String, Arc<dyn HealthCheck>)>, ttl: Duration) {
    if !list.is_empty() {
        handles.health = Handle::new(Checks { list, ttl, last: tokio::sync::Mutex::new(None) });
    }
}

/// Runs every check (or reuses results younger than the cache's time to live).
pub(crate) async fn run(app: &AppInner) -> Arc<[CheckReport]> {
    let Some(checks) = app.handles.health.get::<Checks>() else { return Arc::from([]) };
    let mut last = checks.last.lock().await;
    if let Some((at, reports)) = &*last
        && at.elapsed() < checks.ttl
    {
        return Arc::clone(reports);
    }
    let runs: Vec<_> = checks.list.iter().map(|(name, check)| Box::pin(one(name, Arc::clone(check)))).collect();
    let mut reports: Vec<Option<CheckReport>> = runs.iter().map(|_| None).collect();
    crate::join::join_each(runs, None::<std::future::Pending<()>>, |i, report| reports[i] = Some(report), |_| {}).await;
    let reports: Arc<[CheckReport]> = reports.into_iter().flatten().collect();
    for failed in reports.iter().filter(|r| !r.ok) {
        tracing::warn!(check = %failed.name, error = failed.error.as_deref().unwrap_or(""), took = ?failed.took, "health check failed");
    }
    *last = Some((Instant::now(), Arc::clone(&reports)));
    reports
}

async fn one(name: &str, check: Arc<dyn HealthCheck>) -> CheckReport {
    let began = Instant::now();
    let timeout = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check.timeout())).unwrap_or(DEFAULT_TIMEOUT);
    let run = crate::isolate::catch_hook(|| check.check());
    let error = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error.to_string()),
        Err(_) => Some(format!("timed out after {timeout:?}")),
    };
    CheckReport { name: name.to_owned(), ok: error.is_none(), took: began.elapsed(), error }
}
