//! Scheduled jobs: `#[schedule(every = "30s")]` and `#[schedule(cron = "0 */5 * * * *")]` on
//! async methods of singletons.
//!
//! `build()` starts one timer task per job (unless `AppBuilder::without_schedules`); each run
//! is a task of its own, in a new context scope, counted by the App. A run still going when
//! the next is due makes that one skipped (logged). `App::shutdown` stops the timers, then
//! waits for running jobs within its deadline. `App::run_schedule` runs one by hand.
//!
//! A `once_per_cluster` job runs on the wall clock (an `every` period counts from the Unix
//! epoch, so every instance has the same due times), and each due run is claimed through the
//! App's [`ScheduleLock`] first: only the instance that claimed it runs it. With no
//! `ScheduleLock`, it runs in every instance, as the others.

use std::any::TypeId;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tracing::Instrument;

use crate::config::Config;
use crate::erased::{AnyArc, BoxFuture, UnitFuture};
use crate::error::{BoxError, DiError};
use crate::graph::Graph;
use crate::lineage::Lineage;
use crate::runtime::{AppInner, Handle, Handles};
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
    /// `once_per_cluster`: each due run is claimed through the App's [`ScheduleLock`] first.
    pub once_per_cluster: bool,
    /// `config = "key"`: the configuration key whose value, when set, replaces `when` (a period
    /// for `every`, an expression for `cron`).
    pub config: Option<&'static str>,
    /// `emits(..)`: the events the job emits in its own scope, which has no request's lineage.
    pub emits: &'static [crate::lineage::Emitted],
    pub call: fn(AnyArc) -> UnitFuture,
}

/// Decides which instance of a service runs each due run of a
/// `#[schedule(.., once_per_cluster)]` job: every instance asks to claim the run when it is due,
/// and only the one whose claim succeeds runs it. A singleton provides it
/// (`provides(dyn ScheduleLock)`); tegu-sqlx's `ClusterSchedules` claims runs in a database table.
///
/// A claim must outlive the run: the instances' timers fire a few milliseconds apart, so a lock
/// held only while the run goes would let a second instance run the same due time once the
/// first has finished. Claim the pair (job, due time), once.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::collections::HashSet;
/// use std::sync::Mutex;
/// use std::time::SystemTime;
/// use tegu_core::{singleton_proto, futures::BoxFuture, error::BoxError, schedule::ScheduleLock};
///
/// /// Claims in memory: right for instances sharing one process (tests); a cluster claims
/// /// where all instances see it (a database table, a key-value store).
/// #[singleton_proto(provides(dyn ScheduleLock))]
/// #[derive(Default)]
/// pub struct MemoryClaims {
///     claimed: Mutex<HashSet<(String, SystemTime)>>,
/// }
///
/// impl ScheduleLock for MemoryClaims {
///     fn claim<'a>(&'a self, job: &'a str, due: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
///         Box::pin(async move { Ok(self.claimed.lock().unwrap().insert((job.to_owned(), due))) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let claims = MemoryClaims::default();
/// let due = SystemTime::UNIX_EPOCH;
/// assert!(claims.claim("Reports::purge", due).await.unwrap());
/// assert!(!claims.claim("Reports::purge", due).await.unwrap()); // another instance
/// # }
/// ```
pub trait ScheduleLock: Send + Sync + 'static {
    /// Claims the run of `job` (`Type::method`) due at `due`: `Ok(true)` for the first claim of
    /// that pair, whichever instance makes it; `Ok(false)` for every later one. An `Err` skips
    /// the run in this instance (logged).
    fn claim<'a>(&'a self, job: &'a str, due: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>>;
}

inventory::collect!(ScheduleDescriptor);

#[derive(Clone)]
enum Timing {
    Every(Duration),
    Cron(Box<cron::Schedule>),
}

/// One job of an App.
struct Job {
    proto: usize,
    /// `Type::method`, for logs and errors.
    pub(crate) name: String,
    descriptor: &'static ScheduleDescriptor,
    timing: Timing,
    running: AtomicBool,
}

impl Job {
    /// Whether its due runs are claimed (`once_per_cluster`) and run on the wall clock.
    fn clustered(&self) -> bool {
        self.descriptor.once_per_cluster
    }
}

/// When a job runs: as its attribute says, or as the configuration key it names says. A
/// period or a cron expression that does not parse is a reason, naming the key and its source.
fn timing(descriptor: &ScheduleDescriptor, config: &Config) -> Result<Timing, String> {
    let set = descriptor.config.filter(|key| config.contains(key));
    let from = |key: &str| {
        let origin = config.origin(key).unwrap_or_else(|| "the configuration".to_owned());
        format!("config key {key} (from {origin})")
    };
    match (descriptor.when, set) {
        (When::Every(ms), None) => Ok(Timing::Every(Duration::from_millis(ms.max(1)))),
        (When::Cron(expr), None) => cron::Schedule::from_str(expr)
            .map(|schedule| Timing::Cron(Box::new(schedule)))
            .map_err(|error| format!("has a bad cron expression \"{expr}\": {error}")),
        (When::Every(_), Some(key)) => {
            let text: String = config.get(key).map_err(|e| format!("cannot read its period: {e}"))?;
            parse_period(&text).map(Timing::Every).map_err(|why| format!("has its period in {}: {why}", from(key)))
        }
        (When::Cron(_), Some(key)) => {
            let text: String = config.get(key).map_err(|e| format!("cannot read its cron expression: {e}"))?;
            cron::Schedule::from_str(&text)
                .map(|schedule| Timing::Cron(Box::new(schedule)))
                .map_err(|error| format!("has a bad cron expression \"{text}\" in {}: {error}", from(key)))
        }
    }
}

/// A period as `#[schedule(every = ..)]` writes one: numbers with units (`ms`, `s`, `m`, `h`,
/// `d`), combined (`"1h30m"`), longer than zero.
fn parse_period(text: &str) -> Result<Duration, String> {
    let bad = || format!("\"{text}\" is no period; write numbers with units (`ms`, `s`, `m`, `h`, `d`), e.g. \"30s\"");
    let (mut total, mut rest) = (Duration::ZERO, text.trim());
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        let unit = rest[digits..].find(|c: char| c.is_ascii_digit()).map_or(rest.len(), |at| digits + at);
        let part = match rest[digits..unit].trim() {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3_600)),
            "d" => Duration::from_secs(number.saturating_mul(86_400)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(part);
        rest = &rest[unit..];
    }
    if total.is_zero() {
        Err(format!("\"{text}\" would never wait; give a period longer than zero"))
    } else {
        Ok(total)
    }
}

/// The configuration keys the program's jobs may read their timing from: known keys, not
/// refused as unknown.
pub(crate) fn config_keys() -> impl Iterator<Item = &'static str> {
    inventory::iter::<ScheduleDescriptor>.into_iter().filter_map(|d| d.config)
}

/// The jobs of the protos that `build()` built (or left lazy); a cron expression or a period
/// that does not parse is an error naming the job (the macro checks the attribute's at compile
/// time already; the configuration's are checked here).
fn jobs(graph: &Graph, config: &Config, available: impl Fn(usize) -> bool) -> Result<Vec<Job>, DiError> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for descriptor in inventory::iter::<ScheduleDescriptor> {
        for &proto in graph.of_type((descriptor.proto)()).iter().filter(|&&p| available(p)) {
            let name = format!("{}::{}", (descriptor.proto_name)(), descriptor.method);
            let timing = match timing(descriptor, config) {
                Ok(timing) => timing,
                Err(reason) => {
                    errors.push(DiError::Schedule { job: name, reason });
                    continue;
                }
            };
            jobs.push(Job { proto, name, descriptor, timing, running: AtomicBool::new(false) });
        }
    }
    DiError::collect(errors)?;
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(jobs)
}

/// Whether the jobs of the protos `available` says the App has are well declared (their
/// timings, also those read from configuration): `AppBuilder::check`'s part.
pub(crate) fn check(graph: &Graph, config: &Config, available: impl Fn(usize) -> bool) -> Result<(), DiError> {
    jobs(graph, config, available).map(drop)
}

/// The schedule feature's handle in an App: its jobs, what claims the runs of the
/// `once_per_cluster` ones, and what stops their timers (`shutdown`; dropped with the App,
/// which stops them too).
pub(crate) struct Jobs {
    list: Vec<Job>,
    lock: Option<Arc<dyn ScheduleLock>>,
    stop: watch::Sender<bool>,
}

/// Gives the App's handles its jobs: those of the protos in `graph` that `build()` built (or
/// left lazy), from `inventory`, and the App's [`ScheduleLock`] (the singleton that provides
/// one: `build()` refuses two); or the bad cron expressions.
pub(crate) fn install(
    handles: &mut Handles,
    graph: &Graph,
    config: &Config,
    available: impl Fn(usize) -> bool,
    lock: Option<Arc<dyn ScheduleLock>>,
) -> Result<(), DiError> {
    let list = jobs(graph, config, available)?;
    let Some(clustered) = list.iter().find(|job| job.clustered()) else {
        if !list.is_empty() {
            handles.jobs = Handle::new(Jobs { list, lock: None, stop: watch::Sender::new(false) });
        }
        return Ok(());
    };
    if lock.is_none() {
        tracing::info!(
            job = %clustered.name,
            "a once_per_cluster job runs in this instance at each due time: no singleton provides `dyn ScheduleLock` to claim its runs across instances"
        );
    }
    handles.jobs = Handle::new(Jobs { list, lock, stop: watch::Sender::new(false) });
    Ok(())
}

/// Stops the App's timers (`shutdown`): no run starts after it.
pub(crate) fn stop(app: &AppInner) {
    if let Some(jobs) = app.handles.jobs.get::<Jobs>() {
        jobs.stop.send_replace(true);
    }
}

/// The App's jobs (none without a handle).
fn jobs_of(app: &AppInner) -> &[Job] {
    app.handles.jobs.get::<Jobs>().map_or(&[], |jobs| &jobs.list)
}

/// Starts a timer task per job of `app`, stopped by [`stop`] (or when the App is gone).
pub(crate) fn start(app: &Arc<AppInner>) {
    let Some(jobs) = app.handles.jobs.get::<Jobs>() else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            jobs = jobs.list.len(),
            "the App was built outside a tokio runtime: its scheduled jobs have no timer"
        );
        return;
    };
    for index in 0..jobs.list.len() {
        let weak = Arc::downgrade(app);
        let mut stop = jobs.stop.subscribe();
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
    let Some((timing, clustered)) = app.upgrade().map(|app| {
        let job = &jobs_of(&app)[index];
        (job.timing.clone(), job.clustered())
    }) else {
        return;
    };
    match timing {
        // A clustered job's period counts from the epoch: every instance has the same due times.
        Timing::Every(period) if clustered => {
            wall_timer(|after| aligned_after(after, period), wall_now, |due| fire(&app, index, Some(due))).await;
        }
        Timing::Every(period) => {
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                if !fire(&app, index, None) {
                    return;
                }
            }
        }
        Timing::Cron(schedule) => {
            let next = |after: &chrono::DateTime<chrono::Utc>| schedule.after(after).next();
            wall_timer(next, wall_now, |due| fire(&app, index, Some(due))).await;
            if let Some(app) = app.upgrade() {
                tracing::warn!(job = %jobs_of(&app)[index].name, "a scheduled job's cron expression has no due time left; its timer stops");
            }
        }
    }
}

/// The first multiple of `period` since the Unix epoch after `after`.
fn aligned_after(after: &chrono::DateTime<chrono::Utc>, period: Duration) -> Option<chrono::DateTime<chrono::Utc>> {
    let period = i64::try_from(period.as_millis()).ok()?.max(1);
    let next = after.timestamp_millis().div_euclid(period).checked_add(1)?.checked_mul(period)?;
    chrono::DateTime::from_timestamp_millis(next)
}

/// How long a cron timer sleeps at most before it looks at the wall clock again: a clock
/// stepped forward or back meanwhile (NTP, a VM resumed) is noticed within this.
const RECHECK: Duration = Duration::from_secs(60);

/// Calls `fire` with each due time that `next_after` gives, when the wall clock `now` reads
/// it, until it returns `false` or there is no due time left. A due time is fired once: after
/// the clock steps back, the next one is the first after both the last fired and now, and it
/// fires when the clock reads it (not one old interval later); after it steps forward, within
/// [`RECHECK`].
async fn wall_timer(
    next_after: impl Fn(&chrono::DateTime<chrono::Utc>) -> Option<chrono::DateTime<chrono::Utc>>,
    now: impl Fn() -> chrono::DateTime<chrono::Utc>,
    mut fire: impl FnMut(SystemTime) -> bool,
) {
    let mut last: Option<chrono::DateTime<chrono::Utc>> = None;
    loop {
        let base = last.map_or_else(&now, |last| last.max(now()));
        let Some(next) = next_after(&base) else { return };
        // Sleeps are measured by tokio's (monotonic) clock, the due time by the wall clock:
        // sleep in steps, until the wall clock says it is time.
        loop {
            let left = (next - now()).to_std().unwrap_or_default();
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left.min(RECHECK)).await;
        }
        last = Some(next);
        if !fire(next.into()) {
            return;
        }
    }
}

/// The wall clock, as tokio's clock moves it: the system time, plus however far tokio's clock
/// has run ahead of the monotonic one (nothing, unless a test paused and advanced tokio's time,
/// which the system time knows nothing of).
fn wall_now() -> chrono::DateTime<chrono::Utc> {
    let ahead = tokio::time::Instant::now().into_std().saturating_duration_since(std::time::Instant::now());
    chrono::Utc::now() + chrono::Duration::from_std(ahead).unwrap_or_default()
}

/// Starts a run of job `index` (due at `due`, for a clustered job), unless the previous one
/// is still going or another instance claimed it; `false` when the App is gone.
fn fire(app: &Weak<AppInner>, index: usize, due: Option<SystemTime>) -> bool {
    let Some(app) = app.upgrade() else { return false };
    let Some(guard) = app.try_pending() else { return false };
    let Some(running) = Running::claim(&app, index) else {
        tracing::warn!(job = %jobs_of(&app)[index].name, "a scheduled run is skipped: the previous one is still going");
        crate::telemetry::job_skipped(&jobs_of(&app)[index].name);
        return true;
    };
    drop(tokio::spawn(async move {
        let job = &jobs_of(&app)[index];
        let lock = app.handles.jobs.get::<Jobs>().and_then(|jobs| jobs.lock.as_ref()).filter(|_| job.clustered());
        if let (Some(lock), Some(due)) = (lock, due) {
            match lock.claim(&job.name, due).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(job = %job.name, "another instance claimed this run");
                    return;
                }
                Err(error) => {
                    tracing::error!(job = %job.name, %error, "a once_per_cluster run could not be claimed; skipped in this instance");
                    return;
                }
            }
        }
        let began = std::time::Instant::now();
        let result = run(&app, index, &Lineage::new()).await;
        crate::telemetry::job_ran(&job.name, began.elapsed(), result.is_err());
        drop(running);
        if let Err(error) = result {
            tracing::error!(job = %job.name, %error, "a scheduled job failed");
        }
        drop(guard);
    }));
    true
}

/// One run of job `index`, in a scope of its own, seeded with `lineage` (the request's that
/// started it by hand), in a span with the lineage's log fields.
async fn run(app: &Arc<AppInner>, index: usize, lineage: &Lineage) -> Result<(), DiError> {
    let job = &jobs_of(app)[index];
    let object = app.instance_of(job.proto)?;
    let call = job.descriptor.call;
    let span = tracing::info_span!(
        "job",
        job = %job.name,
        request_id = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        tenant = tracing::field::Empty
    );
    scope::lineage::link(app, &span, lineage, crate::lineage::LinkedWork::Job);
    scope::end::run_job(app, lineage, crate::isolate::catch_hook(|| call(object)))
        .instrument(span)
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
    let found = jobs_of(app)
        .iter()
        .position(|job| (job.descriptor.proto)() == ty && job.descriptor.method == method)
        .ok_or_else(|| DiError::Schedule {
        job: format!("{type_name}::{method}"),
        reason: format!(
            "is not a scheduled job of this App; its jobs are: {}",
            if jobs_of(app).is_empty() {
                "none".to_owned()
            } else {
                jobs_of(app).iter().map(|j| j.name.as_str()).collect::<Vec<_>>().join(", ")
            }
        ),
    })?;
    let job = &jobs_of(app)[found];
    let Some(_guard) = app.try_pending() else {
        return Err(DiError::Schedule {
            job: job.name.clone(),
            reason: "cannot run: the App has shut down".to_owned(),
        });
    };
    let Some(_running) = Running::claim(app, found) else {
        return Err(DiError::Schedule { job: job.name.clone(), reason: "is running already".to_owned() });
    };
    // Started from a request, the job carries its lineage.
    run(app, found, &crate::scope::lineage::of_app(app)).await
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
        let busy = jobs_of(app)[index].running.swap(true, Ordering::AcqRel);
        (!busy).then(|| Running { app: app.clone(), index })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        jobs_of(&self.app)[self.index].running.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    #[test]
    fn periods_parse_as_the_attribute_writes_them() {
        use std::time::Duration;
        assert_eq!(super::parse_period("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(super::parse_period(" 250ms "), Ok(Duration::from_millis(250)));
        assert_eq!(super::parse_period("2d"), Ok(Duration::from_secs(172_800)));
        for bad in ["", "10", "10 parsecs", "h", "0s"] {
            assert!(super::parse_period(bad).is_err(), "{bad:?}");
        }
    }
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use chrono::{DateTime, TimeZone, Utc};

    /// A wall clock that follows tokio's (paused) clock from `start`, stepped by `step` once.
    #[derive(Clone)]
    struct Clock {
        origin: tokio::time::Instant,
        start: DateTime<Utc>,
        step: Arc<Mutex<chrono::Duration>>,
    }

    impl Clock {
        /// Reading 11:30 now, unstepped.
        fn at_half_past_eleven() -> Clock {
            Clock {
                origin: tokio::time::Instant::now(),
                start: Utc.with_ymd_and_hms(2026, 12, 1, 11, 30, 0).unwrap(),
                step: Arc::new(Mutex::new(chrono::Duration::zero())),
            }
        }

        fn now(&self) -> DateTime<Utc> {
            let elapsed = chrono::Duration::from_std(self.origin.elapsed()).unwrap();
            self.start + elapsed + *self.step.lock().unwrap()
        }
    }

    /// An hourly job; the wall clock is stepped back an hour after its first run: it runs next
    /// when the clock reads the next hour (two hours of real time later), not an hour later,
    /// and then every hour on the hour again; no due time runs twice.
    #[tokio::test(start_paused = true)]
    async fn a_clock_stepped_back_delays_the_next_run_to_its_due_time() {
        let schedule = cron::Schedule::from_str("0 0 * * * *").unwrap();
        let clock = Clock::at_half_past_eleven();
        // Each run: what the wall clock read, and how long into the test.
        type Runs = Arc<Mutex<Vec<(DateTime<Utc>, Duration)>>>;
        let runs: Runs = Arc::default();
        let (c, r) = (clock.clone(), runs.clone());
        let timer = tokio::spawn(async move {
            super::wall_timer(
                |after| schedule.after(after).next(),
                || c.now(),
                |_| {
                    let mut runs = r.lock().unwrap();
                    runs.push((c.now(), c.origin.elapsed()));
                    if runs.len() == 1 {
                        *c.step.lock().unwrap() = chrono::Duration::hours(-1); // NTP steps the clock back
                    }
                    runs.len() < 3
                },
            )
            .await
        });
        timer.await.unwrap();
        let runs = runs.lock().unwrap().clone();
        let at = |h: u32| Utc.with_ymd_and_hms(2026, 12, 1, h, 0, 0).unwrap();
        let minutes = |d: Duration| d.as_secs() / 60;
        // 12:00 (30 min in), then the clock reads 11:00 again: 13:00 is next, 2 h later.
        assert_eq!(runs.iter().map(|r| r.0).collect::<Vec<_>>(), [at(12), at(13), at(14)]);
        assert_eq!(runs.iter().map(|r| minutes(r.1)).collect::<Vec<_>>(), [30, 150, 210]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_stepped_forward_runs_within_a_minute_of_the_due_time() {
        let schedule = cron::Schedule::from_str("0 0 * * * *").unwrap();
        let clock = Clock::at_half_past_eleven();
        let stepper = clock.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            *stepper.step.lock().unwrap() = chrono::Duration::minutes(29); // 11:31 reads 12:00
        });
        let fired = Arc::new(Mutex::new(None));
        let (c, f) = (clock.clone(), fired.clone());
        super::wall_timer(
            |after| schedule.after(after).next(),
            || c.now(),
            |_| {
                *f.lock().unwrap() = Some(c.origin.elapsed());
                false
            },
        )
        .await;
        let after = fired.lock().unwrap().unwrap();
        assert!(after <= Duration::from_secs(120), "ran {after:?} in, not half an hour later");
    }
}
