//! `#[schedule(.., once_per_cluster)]`: every instance claims each due run through the App's
//! `ScheduleLock`, and only the one that claimed it runs it; the due times of a period count
//! from the epoch, so the instances agree on them; with no lock each instance runs them all;
//! two locks are an error naming both.

#![cfg(feature = "schedule")]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use tegu_core::{
    App, DiError, ProtoDef, error::BoxError, futures::BoxFuture, handlers, schedule::ScheduleLock, singleton_proto,
};

/// What both "instances" (two Apps in this process) share, as a database would hold it: per
/// due time, how many claims came and which won.
static CLAIMS: Mutex<Vec<(SystemTime, usize)>> = Mutex::new(Vec::new());
/// Runs of the job, across both Apps.
static RUNS: AtomicUsize = AtomicUsize::new(0);

#[singleton_proto(provides(dyn ScheduleLock))]
#[derive(Default)]
pub struct SharedClaims;

impl ScheduleLock for SharedClaims {
    fn claim<'a>(&'a self, job: &'a str, due: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
        Box::pin(async move {
            assert!(job.ends_with("Purge::purge"), "{job}");
            // Across an await, as a database round trip would be.
            tokio::task::yield_now().await;
            let mut claims = CLAIMS.lock().unwrap();
            match claims.iter_mut().find(|(d, _)| *d == due) {
                Some((_, asked)) => {
                    *asked += 1;
                    Ok(false)
                }
                None => {
                    claims.push((due, 1));
                    Ok(true)
                }
            }
        })
    }
}

#[singleton_proto]
pub struct Purge;

#[handlers]
impl Purge {
    #[schedule(every = "1m", once_per_cluster)]
    async fn purge(&self) {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }
}

/// One test at a time: they share the statics.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(start_paused = true)]
async fn two_instances_run_each_due_time_once_and_agree_on_the_due_times() {
    let _serial = SERIAL.lock().await;
    CLAIMS.lock().unwrap().clear();
    RUNS.store(0, Ordering::SeqCst);
    let a = App::builder().build().await.unwrap();
    let b = App::builder().build().await.unwrap();
    tokio::time::sleep(Duration::from_secs(10 * 60 + 30)).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let claims = CLAIMS.lock().unwrap().clone();
    let runs = RUNS.load(Ordering::SeqCst);
    assert!(claims.len() >= 10, "ten minutes of a one-minute job: {claims:?}");
    assert_eq!(runs, claims.len(), "one run per due time, across both instances");
    for (due, asked) in &claims {
        let millis = due.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(millis % 60_000, 0, "a due time on the minute: {due:?}");
        assert_eq!(*asked, 2, "both instances asked for {due:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_lock_each_instance_runs_every_due_time() {
    let _serial = SERIAL.lock().await;
    CLAIMS.lock().unwrap().clear();
    RUNS.store(0, Ordering::SeqCst);
    let a = App::builder().exclude::<SharedClaims>().build().await.unwrap();
    let b = App::builder().exclude::<SharedClaims>().build().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5 * 60 + 30)).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let runs = RUNS.load(Ordering::SeqCst);
    assert!((10..=12).contains(&runs), "five or six due times, in each of two instances: {runs}");
    assert!(CLAIMS.lock().unwrap().is_empty());
}

#[tokio::test]
async fn two_locks_are_an_error_naming_both() {
    struct Other;
    impl ScheduleLock for Other {
        fn claim<'a>(&'a self, _: &'a str, _: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
            Box::pin(async { Ok(true) })
        }
    }
    let other = ProtoDef::singleton::<Other>(|_| Ok(Other)).provides::<Other, dyn ScheduleLock>(|o| o);
    let error = App::builder().register(other).build().await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, DiError::OneOfRole { role: "dyn ScheduleLock", .. }), "{message}");
    assert!(message.contains("SharedClaims") && message.contains("Other"), "{message}");
}
