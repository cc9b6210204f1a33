//! What a running service is operated with: the lifecycle's deadlines, health and readiness,
//! hosted services, and the start-up timeline. The health report joins two features (the
//! health checks and the hosted services), which never import each other, so it is defined
//! here, where they meet, and `health` and `hosted` re-export its parts.

use std::future::Future;
use std::time::Duration;

use super::{App, AppBuilder};
use crate::error::DiError;
use crate::health::CheckReport;
use crate::hosted::ServiceState;
use crate::runtime::phase::Phase;
use crate::startup::StartupReport;

impl AppBuilder {
    /// How long `build()` may take, from its call, for the async constructors and init hooks of
    /// the singletons (all levels together; the deadline is checked while they run, so a
    /// blocking factory cannot be cut); past it, `build()` destroys what it built and fails with
    /// [`DiError::StartTimeout`] naming each constructor or hook still running. Default: 30
    /// seconds (Spring's and .NET's phase default; fx uses 15). Needs tokio's time driver.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Broker;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let error = App::builder()
    ///     .register(ProtoDef::singleton::<Broker>(|_| Ok(Broker))
    ///         .on_init(|_: Arc<Broker>| async { std::future::pending().await }))
    ///     .start_timeout(Duration::from_millis(50))
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(&error, DiError::StartTimeout { running, .. } if running[0].contains("Broker")), "{error}");
    /// # }
    /// ```
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// How long [`App::shutdown`] gives hosted services to stop, and then the singletons'
    /// destroy hooks to run (each phase its own deadline). A service or hook past it is cut,
    /// logged by name, and listed in [`DiError::StopTimeout`]; destroy hooks not reached by
    /// then do not run and are listed too. Default: 15 seconds (fx's; .NET and Spring use 30).
    /// Waiting for context scopes still ending has its own deadline,
    /// [`drain_scopes_timeout`](Self::drain_scopes_timeout). The deadlines need tokio's time driver
    /// (`enable_time`, on in `#[tokio::main]`); outside a tokio runtime the destroy hooks run
    /// without one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Pool;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool))
    ///         .on_destroy(|_: Arc<Pool>| async { std::future::pending().await }))
    ///     .stop_timeout(Duration::from_millis(50))
    ///     .build()
    ///     .await?;
    /// let error = app.shutdown().await.unwrap_err();
    /// assert!(matches!(&error, DiError::StopTimeout { cut, .. } if cut[0].contains("Pool")), "{error}");
    /// # Ok(()) }
    /// ```
    pub fn stop_timeout(mut self, timeout: Duration) -> Self {
        self.stop_timeout = timeout;
        self
    }

    /// Logs a warning (target [`startup::TARGET`](crate::startup::TARGET), `tegu_core::startup`) for every
    /// singleton whose construction and init took at least `threshold`. Default: 1 second.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().slow_start_warning(std::time::Duration::from_millis(200)).build().await?;
    /// # drop(app);
    /// # Ok(()) }
    /// ```
    pub fn slow_start_warning(mut self, threshold: Duration) -> Self {
        self.slow_start = threshold;
        self
    }

    /// How long [`App::health`] reuses the results of the health checks, so that probes
    /// (every load balancer and orchestrator polls) cannot stampede a database. Default: 1
    /// second; zero runs the checks on every call. Concurrent calls share one run either way.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().health_cache(std::time::Duration::from_secs(5)).build().await?;
    /// assert!(app.health().await.ready);
    /// # Ok(()) }
    /// ```
    pub fn health_cache(mut self, ttl: Duration) -> Self {
        self.health_cache = ttl;
        self
    }

    /// Builds the App without starting its hosted services: for tests of the singletons they
    /// use, and tools. [`App::health`] reports them idle (not ready).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().without_hosted_services().build().await?;
    /// assert!(app.hosted_services().is_empty()); // none registered here
    /// # Ok(()) }
    /// ```
    pub fn without_hosted_services(mut self) -> Self {
        self.hosted = false;
        self
    }
}

/// What [`App::health`] returns: liveness, readiness, and why.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HealthReport {
    /// The App serves: it is not shut down, and no hosted service failed with
    /// [`OnFailure::StopApp`](crate::hosted::OnFailure::StopApp).
    pub live: bool,
    /// Live, not shutting down ([`App::begin_shutdown`]), every hosted service running (or
    /// done), and every health check passing.
    pub ready: bool,
    /// Where the App is in its life.
    pub state: AppState,
    /// Each health check, in build order.
    pub checks: Vec<CheckReport>,
    /// Each hosted service, in start order.
    pub services: Vec<ServiceReport>,
    /// Why the last [`App::reload_config`] failed, while no reload has succeeded since: the
    /// App serves the version before it. It does not make the App unready, since every
    /// instance given the same broken file would leave the load balancer at once; tegu-http's
    /// probes do not send it (it names keys and files).
    pub config_error: Option<String>,
}

/// Where an App is in its life, as [`App::state`] and the probes report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppState {
    /// Built and serving.
    Serving,
    /// Shutdown has begun ([`App::begin_shutdown`]: the first signal): still serving, not ready.
    Stopping,
    /// Shut down, or stopped by a hosted service's failure: not live.
    Stopped,
}

impl AppState {
    fn of(live: bool, stopping: bool) -> Self {
        match (live, stopping) {
            (false, _) => AppState::Stopped,
            (true, true) => AppState::Stopping,
            (true, false) => AppState::Serving,
        }
    }

    /// `"serving"`, `"stopping"` or `"stopped"`: what the probes' JSON says.
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::Serving => "serving",
            AppState::Stopping => "stopping",
            AppState::Stopped => "stopped",
        }
    }
}

/// A hosted service in a [`HealthReport`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServiceReport {
    /// Its proto, as errors name it.
    pub name: String,
    /// Where it is.
    pub state: ServiceState,
}

impl App {
    /// Marks the App as shutting down without shutting it down: readiness turns false at once
    /// ([`health`](Self::health)), while requests are still served. tegu-http's `Server` calls it
    /// on the first signal, before its drain delay; [`shutdown`](Self::shutdown) calls it too.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert!(app.health().await.ready);
    /// app.begin_shutdown();
    /// let health = app.health().await;
    /// assert!(!health.ready && health.live && health.state == tegu_core::health::AppState::Stopping);
    /// # Ok(()) }
    /// ```
    pub fn begin_shutdown(&self) {
        if self.inner.lifecycle.advance(Phase::Stopping) {
            tracing::info!("shutdown begun: not ready from now on");
        }
    }

    /// Runs the health checks (or reuses results younger than
    /// [`health_cache`](AppBuilder::health_cache); none once shutdown has begun) and reports
    /// liveness and readiness: what
    /// tegu-http's `/health/live` and `/health/ready` answer. A failed check is logged with its
    /// error; the report keeps the error too, for code that wants it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let health = app.health().await;
    /// assert!(health.live && health.ready && health.checks.is_empty());
    /// app.shutdown().await?;
    /// assert!(!app.health().await.live);
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> HealthReport {
        let inner = &self.inner;
        // Shutting down, the answer is "not ready" whatever the checks say, and once shut down
        // their singletons may be destroyed: ask them only while serving.
        let serving = self.is_live() && !inner.lifecycle.reached(Phase::Stopping);
        let checks = if serving { crate::health::run(inner).await.to_vec() } else { Vec::new() };
        // Read after the checks, which take time: a shutdown begun meanwhile counts.
        let live = self.is_live();
        let stopping = inner.lifecycle.reached(Phase::Stopping);
        let services = self.hosted_services();
        let ready = live && !stopping && checks.iter().all(|c| c.ok) && services.iter().all(|s| s.state.is_ok());
        let state = AppState::of(live, stopping);
        HealthReport { live, ready, state, checks, services, config_error: crate::reload::failed(&self.inner) }
    }

    /// Whether the App serves: not shut down, and no hosted service stopped it. Runs no
    /// check: what a liveness probe asks (`/health/live`), which must not fail because a
    /// database does.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert!(app.is_live());
    /// app.shutdown().await?;
    /// assert!(!app.is_live());
    /// # Ok(()) }
    /// ```
    pub fn is_live(&self) -> bool {
        !self.inner.is_shutting_down() && !crate::hosted::failed_fatally(&self.inner)
    }

    /// Where the App is in its life, without running a check: what `/health/live` reports.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::health::AppState;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert_eq!(app.state(), AppState::Serving);
    /// app.begin_shutdown();
    /// assert_eq!(app.state(), AppState::Stopping);
    /// app.shutdown().await?;
    /// assert_eq!(app.state().as_str(), "stopped");
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> AppState {
        AppState::of(self.is_live(), self.inner.lifecycle.reached(Phase::Stopping))
    }

    /// Each hosted service and its state, in start order.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert!(app.hosted_services().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn hosted_services(&self) -> Vec<ServiceReport> {
        crate::hosted::states(&self.inner).into_iter().map(|(name, state)| ServiceReport { name, state }).collect()
    }

    /// Resolves when a hosted service with [`OnFailure::StopApp`](crate::hosted::OnFailure::StopApp)
    /// failed, with its error ([`DiError::Hosted`]); never if none does. tegu-http's `Server`
    /// shuts down when it resolves; without it, select on it beside your shutdown signal.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// tokio::select! {
    ///     error = app.stop_requested() => panic!("no hosted service here: {error}"),
    ///     () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stop_requested(&self) -> impl Future<Output = DiError> + Send + 'static {
        crate::hosted::stop_requested(&self.inner)
    }

    /// How long each singleton took to start, level by level, and the critical path: see
    /// [`StartupReport`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let report = app.startup_report();
    /// assert!(report.total() < std::time::Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn startup_report(&self) -> &StartupReport {
        static EMPTY: StartupReport = StartupReport { total: Duration::ZERO, protos: Vec::new(), levels: Vec::new() };
        self.inner.handles.startup.get::<StartupReport>().unwrap_or(&EMPTY)
    }
}
