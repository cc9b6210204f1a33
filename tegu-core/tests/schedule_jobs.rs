//! Scheduled jobs: they run, skip a due time while the previous run is going, stop on shutdown
//! (which waits for a running job), run by hand, and each run has its own scope.

#![cfg(feature = "schedule")]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, ContextRef, DiError, context_proto, handlers, singleton_proto};

/// One per scope, numbered.
pub struct Run {
    id: usize,
}

static RUNS: AtomicUsize = AtomicUsize::new(1);

#[context_proto]
impl Run {
    fn new() -> Run {
        Run { id: RUNS.fetch_add(1, Ordering::Relaxed) }
    }
}

#[singleton_proto]
pub struct Jobs {
    #[inject]
    run: ContextRef<Run>,
    ticks: AtomicUsize,
    slow_started: AtomicUsize,
    slow_finished: AtomicUsize,
    cron_ticks: AtomicUsize,
    scopes: Mutex<Vec<usize>>,
}

#[handlers]
impl Jobs {
    #[schedule(every = "30s")]
    async fn tick(&self) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
        self.scopes.lock().unwrap().push(self.run.get().id);
    }

    /// Takes 70 s, due every 30 s: two of three due times are skipped.
    #[schedule(every = "30s")]
    async fn slow(&self) {
        self.slow_started.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(70)).await;
        self.slow_finished.fetch_add(1, Ordering::Relaxed);
    }

    #[schedule(cron = "*/10 * * * * *")]
    async fn every_ten_seconds(&self) {
        self.cron_ticks.fetch_add(1, Ordering::Relaxed);
    }

    #[schedule(every = "1d")]
    async fn failing(&self) -> Result<(), std::io::Error> {
        Err(std::io::Error::other("disk full"))
    }

    #[schedule(every = "1d")]
    async fn panicking(&self) {
        panic!("the job panicked");
    }
}

fn count(n: &AtomicUsize) -> usize {
    n.load(Ordering::Relaxed)
}

#[tokio::test(start_paused = true)]
async fn jobs_run_on_time_each_in_its_own_scope_and_skip_while_running() {
    let app = App::builder().build().await.unwrap();
    let jobs = app.get_object::<Jobs>().unwrap();
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(count(&jobs.ticks), 0, "the first run is one period after start");
    tokio::time::sleep(Duration::from_secs(66)).await; // t = 95 s: due at 30, 60, 90
    assert_eq!(count(&jobs.ticks), 3);
    let scopes = jobs.scopes.lock().unwrap().clone();
    assert!(scopes[0] != scopes[1] && scopes[1] != scopes[2], "a scope per run: {scopes:?}");
    // `slow`: started at 30 (until 100), skipped at 60 and 90.
    assert_eq!(count(&jobs.slow_started), 1);
    tokio::time::sleep(Duration::from_secs(30)).await; // t = 125 s: started again at 120
    assert_eq!((count(&jobs.slow_started), count(&jobs.slow_finished)), (2, 1));
    let cron = count(&jobs.cron_ticks);
    assert!((12..=13).contains(&cron), "cron every 10 s, for 125 s: {cron}");
    app.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_timers_and_waits_for_a_running_job() {
    let app = App::builder().build().await.unwrap();
    let jobs = app.get_object::<Jobs>().unwrap();
    tokio::time::sleep(Duration::from_secs(35)).await; // `slow` runs since 30 s, until 100 s
    assert_eq!((count(&jobs.slow_started), count(&jobs.slow_finished)), (1, 0));
    // Its deadline is 10 s (the default), shorter than the job's 65 s left: it stops waiting.
    app.shutdown().await.unwrap();
    let ticks = count(&jobs.ticks);
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(count(&jobs.ticks), ticks, "no run after shutdown");
    assert_eq!(count(&jobs.slow_started), 1);

    // With a deadline long enough, shutdown waits for the running job.
    let app = App::builder().drain_scopes_timeout(Duration::from_secs(120)).build().await.unwrap();
    let jobs = app.get_object::<Jobs>().unwrap();
    tokio::time::sleep(Duration::from_secs(35)).await;
    app.shutdown().await.unwrap();
    assert_eq!((count(&jobs.slow_started), count(&jobs.slow_finished)), (1, 1));
}

// Paused time: the sleep at the end passes the shortest period, so a timer would have run.
#[tokio::test(start_paused = true)]
async fn jobs_run_by_hand() {
    let app = App::builder().without_schedules().build().await.unwrap();
    let jobs = app.get_object::<Jobs>().unwrap();
    app.run_schedule::<Jobs>("tick").await.unwrap();
    app.run_schedule::<Jobs>("tick").await.unwrap();
    assert_eq!(count(&jobs.ticks), 2);

    let failed = app.run_schedule::<Jobs>("failing").await.unwrap_err();
    assert!(matches!(failed, DiError::JobFailed { .. }));
    assert_eq!(failed.to_string(), "scheduled job `schedule_jobs::Jobs::failing` failed: disk full");
    let panicked = app.run_schedule::<Jobs>("panicking").await.unwrap_err();
    assert!(panicked.to_string().ends_with("failed: panicked: the job panicked"), "{panicked}");

    let unknown = app.run_schedule::<Jobs>("vacuum").await.unwrap_err();
    assert!(
        unknown.to_string()
            == ("scheduled job `schedule_jobs::Jobs::vacuum` is not a scheduled job of this App; its jobs are: \
             schedule_jobs::Configured::nightly, schedule_jobs::Configured::tick, schedule_jobs::Jobs::every_ten_seconds, schedule_jobs::Jobs::failing, schedule_jobs::Jobs::panicking, schedule_jobs::Jobs::slow, \
             schedule_jobs::Jobs::tick"),
        "{unknown}"
    );
    // Without a timer, nothing runs by itself, though the shortest period passes.
    tokio::time::sleep(Duration::from_secs(95)).await;
    assert_eq!(count(&jobs.ticks), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_running_already_is_not_run_by_hand() {
    let app = Arc::new(App::builder().without_schedules().build().await.unwrap());
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_schedule::<Jobs>("slow").await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let busy = app.run_schedule::<Jobs>("slow").await.unwrap_err();
    assert_eq!(busy.to_string(), "scheduled job `schedule_jobs::Jobs::slow` is running already");
    running.await.unwrap().unwrap();
    app.run_schedule::<Jobs>("slow").await.unwrap();
}

#[tokio::test]
async fn no_job_runs_by_hand_after_shutdown() {
    let app = App::builder().without_schedules().build().await.unwrap();
    app.shutdown().await.unwrap();
    let error = app.run_schedule::<Jobs>("tick").await.unwrap_err();
    assert_eq!(error.to_string(), "scheduled job `schedule_jobs::Jobs::tick` cannot run: the App has shut down");
}

/// Jobs whose period or cron expression a configuration key may set.
#[singleton_proto]
#[derive(Default)]
pub struct Configured {
    ticks: AtomicUsize,
    crons: AtomicUsize,
}

#[handlers]
impl Configured {
    #[schedule(every = "1h", config = "jobs.tick_every")]
    async fn tick(&self) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }

    /// Never, unless configured: at midnight on New Year's Day 2099.
    #[schedule(cron = "0 0 0 1 1 * 2099", config = "jobs.cron")]
    async fn nightly(&self) {
        self.crons.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(start_paused = true)]
async fn a_configuration_key_sets_the_period_or_the_cron_expression() {
    let app = App::builder()
        .config_value("jobs.tick_every", "10s")
        .config_value("jobs.cron", "*/20 * * * * *")
        .build()
        .await
        .unwrap();
    let configured = app.get_object::<Configured>().unwrap();
    tokio::time::sleep(Duration::from_secs(65)).await;
    assert_eq!(count(&configured.ticks), 6, "every 10 s, not every hour");
    assert!((3..=4).contains(&count(&configured.crons)), "every 20 s: {}", count(&configured.crons));
    app.shutdown().await.unwrap();
    // Without the keys, the attribute's.
    let app = App::builder().build().await.unwrap();
    let configured = app.get_object::<Configured>().unwrap();
    tokio::time::sleep(Duration::from_secs(65)).await;
    assert_eq!((count(&configured.ticks), count(&configured.crons)), (0, 0));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_bad_configured_schedule_fails_the_build_naming_the_job_and_the_key() {
    let error = App::builder()
        .config_value("jobs.tick_every", "ten seconds")
        .config_value("jobs.cron", "every night")
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "scheduled job `schedule_jobs::Configured::tick` has its period in config key jobs.tick_every (from "
        ) && error.contains("\"ten seconds\" is no period"),
        "{error}"
    );
    assert!(
        error.contains("scheduled job `schedule_jobs::Configured::nightly` has a bad cron expression \"every night\" in config key jobs.cron"),
        "{error}"
    );
}
