//! Scheduled jobs: `#[schedule(every = "30s")]` and `#[schedule(cron = "0 */5 * * * *")]` on
//! async methods of singletons.
//!
//! `build()` starts one timer task per job (unless `AppBuilder::without_schedules`); each run
//! is a task of its own, in a new context scope, counted by the App. A run still going when
//! the next is due makes that one skipped (logged). `App::shutdown` stops the timers, then
//! waits for running jobs within its deadline. `App::run_schedule` runs one by hand.

use std::any::TypeId;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::app::AppInner;
use crate::error::DiError;
use crate::proto::{AnyArc, HookFuture};
use crate::scope;

/// When a job runs, as written in `#[schedule(..)]`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum When {
    /// Every so many milliseconds, the first time one period after start.
    Every(u64),
    /// A cron expression with seconds (`sec min hour day-of-month month day-of-week [year]`),
    /// in UTC.
    Cron(&'static str),
}

/// What `#[schedule]` submits through `inventory`.
#[doc(hidden)]
#[derive(Debug)]
pub struct ScheduleDescriptor {
    pub proto: fn() -> TypeId,
    pub proto_name: fn() -> &'static str,
    pub method: &'static str,
    pub when: When,
    pub call: fn(AnyArc) -> HookFuture,
}

inventory::collect!(ScheduleDescriptor);

#[derive(Clone)]
enum Timing {
    Every(Duration),
    Cron(Box<cron::Schedule>),
}

/// One job of an App.
pub(crate) struct Job {
    proto: usize,
    /// `Type::method`, for logs and errors.
    pub(crate) name: String,
    descriptor: &'static ScheduleDescriptor,
    timing: Timing,
    running: AtomicBool,
}

/// The jobs of the protos that `build()` built (or left lazy); a cron expression that does
/// not parse is an error naming the job (the macro checks it at compile time already).
pub(crate) fn jobs(graph: &crate::graph::Graph, available: impl Fn(usize) -> bool) -> Result<Vec<Job>, DiError> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for descriptor in inventory::iter::<ScheduleDescriptor> {
        for &proto in graph.of_type((descriptor.proto)()).iter().filter(|&&p| available(p)) {
            let name = format!("{}::{}", (descriptor.proto_name)(), descriptor.method);
            let timing = match descriptor.when {
                When::Every(ms) => Timing::Every(Duration::from_millis(ms.max(1))),
                When::Cron(expr) => match cron::Schedule::from_str(expr) {
                    Ok(schedule) => Timing::Cron(Box::new(schedule)),
                    Err(error) => {
                        errors.push(DiError::Schedule {
                            job: name,
                            reason: format!("has a bad cron expression \"{expr}\": {error}"),
                        });
                        continue;
                    }
                },
            };
            jobs.push(Job { proto, name, descriptor, timing, running: AtomicBool::new(false) });
        }
    }
    DiError::collect(errors)?;
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(jobs)
}

/// Starts a timer task per job of `app`, stopped by `stop` (or when the App is gone).
pub(crate) fn start(app: &Arc<AppInner>, stop: &watch::Sender<bool>) {
    if app.jobs.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            jobs = app.jobs.len(),
            "the App was built outside a tokio runtime: its scheduled jobs have no timer"
        );
        return;
    };
    for index in 0..app.jobs.len() {
        let weak = Arc::downgrade(app);
        let mut stop = stop.subscribe();
        drop(runtime.spawn(async move {
            tokio::select! {
                () = timer(weak, index) => {}
                _ = stop.wait_for(|stopped| *stopped) => {}
            }
        }));
    }
}

/// Runs job `index` at each due time until the App is gone.
async fn timer(app: Weak<AppInner>, index: usize) {
    let Some(timing) = app.upgrade().map(|app| app.jobs[index].timing.clone()) else { return };
    match timing {
        Timing::Every(period) => {
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                if !fire(&app, index) {
                    return;
                }
            }
        }
        Timing::Cron(schedule) => {
            let mut last = chrono::Utc::now();
            loop {
                // From the later of now and the last due time: a timer woken a little early
                // does not fire twice, and one whose clock is paused (tests) still advances.
                let base = last.max(chrono::Utc::now());
                let Some(next) = schedule.after(&base).next() else {
                    if let Some(app) = app.upgrade() {
                        tracing::warn!(job = %app.jobs[index].name, "a scheduled job's cron expression has no due time left; its timer stops");
                    }
                    return;
                };
                let wait = (next - base).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                last = next;
                if !fire(&app, index) {
                    return;
                }
            }
        }
    }
}

/// Starts a run of job `index`, unless the previous one is still going; `false` when the App
/// is gone.
fn fire(app: &Weak<AppInner>, index: usize) -> bool {
    let Some(app) = app.upgrade() else { return false };
    let Some(guard) = app.try_pending() else { return false };
    let Some(running) = Running::claim(&app, index) else {
        tracing::warn!(job = %app.jobs[index].name, "a scheduled run is skipped: the previous one is still going");
        return true;
    };
    drop(tokio::spawn(async move {
        let result = run(&app, index).await;
        drop(running);
        if let Err(error) = result {
            tracing::error!(job = %app.jobs[index].name, %error, "a scheduled job failed");
        }
        drop(guard);
    }));
    true
}

/// One run of job `index`, in a scope of its own.
async fn run(app: &Arc<AppInner>, index: usize) -> Result<(), DiError> {
    let job = &app.jobs[index];
    let object = app.instance_of(job.proto)?;
    let call = job.descriptor.call;
    scope::run_job(app, scope::catch_hook(|| call(object)))
        .await
        .map_err(|source| DiError::JobFailed { job: job.name.clone(), source: Arc::from(source) })
}

/// `App::run_schedule`: runs the job of `T` named `method` now and returns its result.
pub(crate) async fn run_by_hand(
    app: &Arc<AppInner>,
    ty: TypeId,
    type_name: &'static str,
    method: &str,
) -> Result<(), DiError> {
    let found =
        app.jobs.iter().position(|job| (job.descriptor.proto)() == ty && job.descriptor.method == method).ok_or_else(
            || DiError::Schedule {
                job: format!("{type_name}::{method}"),
                reason: format!(
                    "is not a scheduled job of this App; its jobs are: {}",
                    if app.jobs.is_empty() {
                        "none".to_owned()
                    } else {
                        app.jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>().join(", ")
                    }
                ),
            },
        )?;
    let job = &app.jobs[found];
    let Some(_guard) = app.try_pending() else {
        return Err(DiError::Schedule {
            job: job.name.clone(),
            reason: "cannot run: the App has shut down".to_owned(),
        });
    };
    let Some(_running) = Running::claim(app, found) else {
        return Err(DiError::Schedule { job: job.name.clone(), reason: "is running already".to_owned() });
    };
    run(app, found).await
}

/// A job marked running, until this is dropped (however its run ends, also when its task is
/// dropped unpolled).
struct Running {
    app: Arc<AppInner>,
    index: usize,
}

impl Running {
    /// Marks job `index` running; `None` if it is already.
    fn claim(app: &Arc<AppInner>, index: usize) -> Option<Running> {
        let busy = app.jobs[index].running.swap(true, Ordering::AcqRel);
        (!busy).then(|| Running { app: app.clone(), index })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.app.jobs[self.index].running.store(false, Ordering::Release);
    }
}
