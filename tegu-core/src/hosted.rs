//! Hosted services: long-running work a singleton does for the App's whole life (a queue
//! consumer, a second listener, a cache refresher), `provides(dyn HostedService)`.
//!
//! `build()` starts one task per service once every singleton is built, in dependency order;
//! `App::shutdown` tells them to stop ([`Stop`]) before it waits for scopes and destroys any
//! singleton, newest first, each within the stop deadline; a service still running then is cut
//! (its task aborted) and named in `shutdown`'s error. A service that fails or panics follows
//! its [`OnFailure`] policy, logged with its proto's name.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::erased::UnitFuture;
use crate::error::DiError;
use crate::runtime::{AppInner, Handle, Handles};

// What the App reports of its hosted services.
pub use crate::app::ServiceReport;

/// Long-running work of a singleton, started by `build()` and stopped by
/// [`App::shutdown`](crate::App::shutdown) before any singleton it uses is destroyed. A proto
/// declares it with `provides(dyn HostedService)`; it must be a singleton.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{App, futures::UnitFuture, hosted::{HostedService, Stop}, singleton_proto};
///
/// #[singleton_proto(provides(dyn HostedService))]
/// #[derive(Default)]
/// pub struct Refresher { rounds: AtomicUsize }
///
/// impl HostedService for Refresher {
///     fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
///         Box::pin(async move {
///             loop {
///                 self.rounds.fetch_add(1, Ordering::Relaxed);
///                 tokio::select! {
///                     () = stop.stopped() => return Ok(()), // shutdown: return promptly
///                     () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
///                 }
///             }
///         })
///     }
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?; // starts the refresher
/// tokio::time::sleep(std::time::Duration::from_millis(30)).await;
/// app.shutdown().await?; // stops it first, then destroys the singletons
/// assert!(app.get_object::<Refresher>()?.rounds.load(Ordering::Relaxed) > 1);
/// # Ok(()) }
/// ```
pub trait HostedService: Send + Sync + 'static {
    /// Does the work until `stop` fires, then returns. An `Err` or a panic before that is a
    /// failure, handled as [`on_failure`](Self::on_failure) says.
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture;

    /// What a failure does. Default: [`OnFailure::StopApp`].
    fn on_failure(&self) -> OnFailure {
        OnFailure::StopApp
    }
}

/// What a hosted service's failure (an `Err`, or a panic, before it was told to stop) does.
/// Every failure is logged (`tracing::error!`) with the proto's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFailure {
    /// Stop the App: [`App::stop_requested`](crate::App::stop_requested) resolves with the
    /// error (tegu-http's `Server` then shuts down and returns it).
    StopApp,
    /// Run it again after `first`, doubling each time it fails again, up to `max`; a run that
    /// lasted longer than `max` starts the backoff over.
    Restart {
        /// The first wait.
        first: Duration,
        /// The longest wait.
        max: Duration,
    },
    /// Log it and leave the service stopped (readiness reports it failed).
    Log,
}

/// Tells a hosted service to stop: fires once, when the App shuts down. Cheap to clone.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Resolves once the service should stop (at once if it already should).
    pub async fn stopped(&self) {
        let mut signal = self.0.clone();
        // An error means the App is gone: stop too.
        let _ = signal.wait_for(|stop| *stop).await;
    }

    /// Whether the service should stop now (also once the App is gone).
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }
}

impl fmt::Debug for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stop").field("stopped", &self.is_stopped()).finish()
    }
}

/// Where a hosted service is in its life, as readiness reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceState {
    /// Not started yet (the App was built without starting its hosted services).
    Idle,
    /// Running.
    Running,
    /// Failed, waiting to run again ([`OnFailure::Restart`]).
    Restarting,
    /// Returned `Ok` on its own: its work is done.
    Done,
    /// Failed and not restarted.
    Failed,
    /// Told to stop, and stopped.
    Stopped,
}

impl ServiceState {
    /// Whether this state lets the App be ready: running, or done.
    pub fn is_ok(self) -> bool {
        matches!(self, ServiceState::Running | ServiceState::Done)
    }

    /// The state in lower case: `"running"`, `"restarting"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Idle => "idle",
            ServiceState::Running => "running",
            ServiceState::Restarting => "restarting",
            ServiceState::Done => "done",
            ServiceState::Failed => "failed",
            ServiceState::Stopped => "stopped",
        }
    }
}

/// One hosted service of an App.
struct Service {
    label: String,
    object: Arc<dyn HostedService>,
    /// Its own stop signal: services are told to stop one after the other, newest first.
    stop: watch::Sender<bool>,
    state: Mutex<ServiceState>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Service {
    fn set(&self, state: ServiceState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }

    fn state(&self) -> ServiceState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The hosted services of an App, in start order.
pub(crate) struct Services {
    list: Vec<Arc<Service>>,
    /// The first failure of a [`OnFailure::StopApp`] service.
    fatal: watch::Sender<Option<DiError>>,
}

/// Puts the hosted services (each proto's object, cast to `dyn HostedService`, in start order)
/// in their handle.
pub(crate) fn install(handles: &mut Handles, services: Vec<(String, Arc<dyn HostedService>)>) {
    let list: Vec<Arc<Service>> = services
        .into_iter()
        .map(|(label, object)| {
            Arc::new(Service {
                label,
                object,
                stop: watch::Sender::new(false),
                state: Mutex::new(ServiceState::Idle),
                task: Mutex::new(None),
            })
        })
        .collect();
    handles.hosted = Handle::new(Services { list, fatal: watch::Sender::new(None) });
}

fn services(app: &AppInner) -> Option<&Services> {
    app.handles.hosted.get::<Services>()
}

/// The runtime hosted services start on; the error naming the first service if there is none.
pub(crate) fn can_start(first: &str) -> Result<tokio::runtime::Handle, DiError> {
    tokio::runtime::Handle::try_current().map_err(|_| DiError::Hosted {
        service: first.to_owned(),
        reason: "cannot start: the App was built outside a tokio runtime".to_owned(),
    })
}

/// Starts every hosted service's task, in order, on `runtime`.
pub(crate) fn start(app: &AppInner, runtime: &tokio::runtime::Handle) {
    let Some(services) = services(app) else { return };
    for service in &services.list {
        service.set(ServiceState::Running);
        tracing::info!(service = %service.label, "hosted service started");
        let task = runtime.spawn(supervise(Arc::clone(service), service.stop.subscribe(), services.fatal.clone()));
        *service.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }
}

/// Runs a service until it is told to stop, following its failure policy.
async fn supervise(service: Arc<Service>, stop: watch::Receiver<bool>, fatal: watch::Sender<Option<DiError>>) {
    let stop = Stop(stop);
    let mut backoff: Option<Duration> = None;
    loop {
        let began = Instant::now();
        // A panic in `run` itself, before its future exists, is caught as one in the future.
        let result = crate::isolate::catch_hook(|| Arc::clone(&service.object).run(stop.clone())).await;
        if stop.is_stopped() {
            if let Err(error) = result {
                tracing::warn!(service = %service.label, %error, "hosted service failed while stopping");
            }
            service.set(ServiceState::Stopped);
            return;
        }
        let error = match result {
            Ok(()) => {
                tracing::info!(service = %service.label, "hosted service finished its work");
                service.set(ServiceState::Done);
                return;
            }
            Err(error) => error,
        };
        let policy = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| service.object.on_failure()));
        match policy.unwrap_or(OnFailure::StopApp) {
            OnFailure::StopApp => {
                tracing::error!(service = %service.label, %error, "hosted service failed; stopping the App");
                service.set(ServiceState::Failed);
                let error = DiError::Hosted { service: service.label.clone(), reason: format!("failed: {error}") };
                fatal.send_if_modified(|first| first.is_none() && first.replace(error).is_none());
                return;
            }
            OnFailure::Log => {
                tracing::error!(service = %service.label, %error, "hosted service failed; left stopped");
                service.set(ServiceState::Failed);
                return;
            }
            OnFailure::Restart { first, max } => {
                let wait = match backoff {
                    Some(last) if began.elapsed() <= max => (last * 2).min(max),
                    _ => first.min(max),
                };
                backoff = Some(wait);
                tracing::error!(service = %service.label, %error, retry_in = ?wait, "hosted service failed; restarting");
                crate::telemetry::hosted_restart(&service.label);
                service.set(ServiceState::Restarting);
                tokio::select! {
                    () = tokio::time::sleep(wait) => service.set(ServiceState::Running),
                    () = stop.stopped() => {
                        service.set(ServiceState::Stopped);
                        return;
                    }
                }
            }
        }
    }
}

/// Tells the hosted services to stop one after the other, newest first, each awaited before
/// the next is told, all within `within`: the labels of those still running at the deadline,
/// whose tasks are aborted (and awaited a moment, so that none runs on while the singletons
/// are destroyed). Dropped early (a forced shutdown), it aborts the tasks it has not awaited.
pub(crate) async fn stop(app: &AppInner, within: Duration) -> Vec<String> {
    let Some(services) = services(app) else { return Vec::new() };
    let deadline = tokio::time::Instant::now() + within;
    let tasks: Vec<(&Service, AbortOnDrop)> = services
        .list
        .iter()
        .rev()
        .filter_map(|s| Some((&**s, AbortOnDrop(s.task.lock().unwrap_or_else(|e| e.into_inner()).take()?))))
        .collect();
    let mut cut = Vec::new();
    for (service, mut task) in tasks {
        service.stop.send_replace(true);
        if tokio::time::timeout_at(deadline, &mut task.0).await.is_err() {
            task.0.abort();
            let _ = tokio::time::timeout(CUT_GRACE, &mut task.0).await;
            tracing::error!(service = %service.label, deadline = ?within, "hosted service did not stop within the stop deadline; cut");
            service.set(ServiceState::Stopped);
            cut.push(service.label.clone());
        }
    }
    cut
}

/// How long an aborted hosted task gets to be dropped (it may be in the middle of a poll on
/// another worker).
const CUT_GRACE: Duration = Duration::from_secs(1);

/// A hosted service's task, aborted if dropped before its end.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Each hosted service's label and state, in start order.
pub(crate) fn states(app: &AppInner) -> Vec<(String, ServiceState)> {
    services(app).map_or_else(Vec::new, |s| s.list.iter().map(|s| (s.label.clone(), s.state())).collect())
}

/// Resolves with the first failure of an [`OnFailure::StopApp`] service; never if none fails.
pub(crate) fn stop_requested(app: &AppInner) -> impl Future<Output = DiError> + Send + 'static {
    let fatal = services(app).map(|s| s.fatal.subscribe());
    async move {
        if let Some(mut fatal) = fatal
            && let Ok(error) = fatal.wait_for(Option::is_some).await
            && let Some(error) = error.clone()
        {
            return error;
        }
        std::future::pending().await
    }
}

/// Whether a service failed with [`OnFailure::StopApp`].
pub(crate) fn failed_fatally(app: &AppInner) -> bool {
    services(app).is_some_and(|s| s.fatal.borrow().is_some())
}
