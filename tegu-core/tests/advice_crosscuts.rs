//! Crosscuts: an advice declared once with `crosscut!` runs around every method it selects
//! (by the trait a proto provides, its module, its type's name, the method's name) and no
//! other, outside the method's own advices in the documented order, with its parameters.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{
    App, ContextRef,
    advice::{Advice, AdviceParams, Call, Next, Outcome},
    context_proto, crosscut, intercept, singleton_proto,
};

/// What the advices saw, in order: `enter X method`, `leave X method`.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn log(line: String) {
    LOG.lock().unwrap().push(line);
}

/// The log of what ran inside `f`, alone (tests that read the log take this lock).
async fn logged<F: std::future::Future>(f: F) -> (F::Output, Vec<String>) {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE.lock().await;
    LOG.lock().unwrap().clear();
    let out = f.await;
    (out, std::mem::take(&mut *LOG.lock().unwrap()))
}

/// Logs around each call it advises, with its parameters' label.
macro_rules! recorder {
    ($name:ident) => {
        #[singleton_proto]
        #[derive(Default)]
        pub struct $name;

        impl<R> Advice<R> for $name {
            async fn around(&self, call: Call, next: Next<'_, R>) -> R {
                let label = call.params_of::<$name>().label;
                log(format!("enter {} {}{label}", stringify!($name), call.method()));
                let out = next.run().await;
                log(format!("leave {} {}", stringify!($name), call.method()));
                out
            }
        }

        impl AdviceParams for $name {
            type Params = Label;
            const DEFAULT: &'static Label = &Label { label: "", weight: 1 };
        }
    };
}

/// The parameters of the recorders: a label the log shows, and a weight.
pub struct Label {
    pub label: &'static str,
    pub weight: u32,
}

recorder!(Audit);
recorder!(Outer);
recorder!(Inner);
recorder!(Own);
recorder!(Reads);

/// The marker that `Audit` selects by.
pub trait Audited: Send + Sync {}

crosscut!(Audit, implements = dyn Audited);
// Around everything `Audit` advises, and outside it (lower order): `Outer`, then `Inner`
// inside `Audit` (higher order), on the `ledger` methods only.
crosscut!(Outer(label = ":outer"), implements = dyn Audited, methods = "ledger", order = -5);
crosscut!(Inner, methods = "ledger", types = "Books", order = 5);
// By module and name: every `find_*` or `list` of a type defined in `crate::shop`.
crosscut!(Reads(label = ":reads", weight = 3), module = "crate::shop", methods = "find_*|list");

#[singleton_proto(provides(dyn Audited))]
pub struct Books;
impl Audited for Books {}

#[intercept(Own)]
impl Books {
    pub async fn ledger(&self, year: u32) -> Result<u32, String> {
        log(format!("body ledger {year}"));
        if year == 0 { Err("no year 0".into()) } else { Ok(year) }
    }

    #[intercept(Own(label = ":method"))]
    pub async fn close(&self) {
        log("body close".into());
    }

    /// Not `pub`: no join point, nothing around it.
    async fn private(&self) -> u8 {
        log("body private".into());
        7
    }

    pub async fn call_private(&self) -> u8 {
        self.private().await
    }

    /// No receiver: no join point (an associated function), nothing around it.
    pub async fn opened() -> u8 {
        log("body opened".into());
        1
    }

    /// Not async: untouched.
    pub fn sync_count(&self) -> usize {
        log("body sync_count".into());
        1
    }
}

#[singleton_proto(provides(dyn Audited))]
pub struct Payroll;
impl Audited for Payroll {}

#[intercept]
impl Payroll {
    pub async fn pay(&self, who: &str) -> String {
        log(format!("body pay {who}"));
        format!("paid {who}")
    }
}

/// Not `Audited`: `Audit` never runs around it.
#[singleton_proto]
pub struct Weather;

#[intercept]
impl Weather {
    pub async fn today(&self) -> &'static str {
        log("body today".into());
        "sunny"
    }
}

pub mod shop {
    use super::*;

    #[singleton_proto]
    pub struct Catalog;

    #[intercept]
    impl Catalog {
        pub async fn find_item(&self, id: u32) -> Option<u32> {
            log(format!("body find_item {id}"));
            Some(id)
        }

        pub async fn list(&self) -> usize {
            log("body list".into());
            3
        }

        pub async fn listing(&self) -> usize {
            log("body listing".into());
            4
        }
    }

    /// An impl block written by a `macro_rules!` (its type a `$t:ty` fragment).
    macro_rules! joined {
        ($t:ty) => {
            #[intercept]
            impl $t {
                pub async fn find_made(&self) -> u8 {
                    log("body find_made".into());
                    1
                }
            }
        };
    }

    #[singleton_proto]
    pub struct MacroMade;
    joined!(MacroMade);
}

#[tokio::test]
async fn a_marker_crosscut_runs_around_every_method_of_the_protos_providing_it_and_no_other() {
    let app = App::builder().build().await.unwrap();
    let (books, payroll, weather) = (
        app.get_object::<Books>().unwrap(),
        app.get_object::<Payroll>().unwrap(),
        app.get_object::<Weather>().unwrap(),
    );
    let (_, seen) = logged(app.run_in_context(async {
        assert_eq!(payroll.pay("ada").await, "paid ada");
        assert_eq!(weather.today().await, "sunny");
        assert_eq!(books.call_private().await, 7);
        assert_eq!(books.sync_count(), 1);
        assert_eq!(Books::opened().await, 1);
    }))
    .await;
    assert_eq!(
        seen,
        [
            "enter Audit pay",
            "body pay ada",
            "leave Audit pay",
            "body today",
            "enter Audit call_private",
            "enter Own call_private",
            "body private",
            "leave Own call_private",
            "leave Audit call_private",
            "body sync_count",
            "body opened",
        ]
    );
}

#[tokio::test]
async fn crosscuts_run_by_order_outside_the_methods_own_advices_with_their_parameters() {
    let app = App::builder().build().await.unwrap();
    let books = app.get_object::<Books>().unwrap();
    let (out, seen) = logged(app.run_in_context(async { (books.ledger(2026).await, books.close().await) })).await;
    assert_eq!(out, (Ok(2026), ()));
    assert_eq!(
        seen,
        [
            // order -5, then Audit (0), then Inner (5): all outside the impl block's `Own`.
            "enter Outer ledger:outer",
            "enter Audit ledger",
            "enter Inner ledger",
            "enter Own ledger",
            "body ledger 2026",
            "leave Own ledger",
            "leave Inner ledger",
            "leave Audit ledger",
            "leave Outer ledger",
            // The impl block's `Own`, then the method's own `Own` with its parameters.
            "enter Audit close",
            "enter Own close",
            "enter Own close:method",
            "body close",
            "leave Own close",
            "leave Own close",
            "leave Audit close",
        ]
    );
}

/// A join point of a concrete instance of a generic type (registered by hand: the attributes
/// take no generic struct).
pub struct Cache<T> {
    items: Vec<T>,
}

#[intercept]
impl Cache<u32> {
    pub async fn find_cached(&self) -> usize {
        log("body find_cached".into());
        self.items.len()
    }
}

crosscut!(Reads(label = ":generic"), types = "Cache", methods = "find_*");

#[tokio::test]
async fn a_concrete_generic_type_has_join_points() {
    let cache = tegu_core::ProtoDef::singleton::<Cache<u32>>(|_| Ok(Cache { items: vec![] }));
    let app = App::builder().register(cache).build().await.unwrap();
    let cache = app.get_object::<Cache<u32>>().unwrap();
    let (out, seen) = logged(app.run_in_context(cache.find_cached())).await;
    assert_eq!(out, 0);
    assert_eq!(seen, ["enter Reads find_cached:generic", "body find_cached", "leave Reads find_cached"]);
}

#[tokio::test]
async fn module_and_name_selectors_pick_exactly_the_matching_methods() {
    let app = App::builder().build().await.unwrap();
    let catalog = app.get_object::<shop::Catalog>().unwrap();
    let (out, seen) = logged(
        app.run_in_context(async { (catalog.find_item(4).await, catalog.list().await, catalog.listing().await) }),
    )
    .await;
    let made = app.get_object::<shop::MacroMade>().unwrap();
    let (made, made_seen) = logged(app.run_in_context(made.find_made())).await;
    assert_eq!((made, made_seen.len()), (1, 3), "{made_seen:?}");
    assert_eq!(out, (Some(4), 3, 4));
    assert_eq!(
        seen,
        [
            "enter Reads find_item:reads",
            "body find_item 4",
            "leave Reads find_item",
            "enter Reads list:reads",
            "body list",
            "leave Reads list",
            "body listing",
        ]
    );
}

/// Counts what a crosscut sees of the calls it advises: failures, arguments, weights.
#[singleton_proto]
#[derive(Default)]
pub struct Stats {
    calls: AtomicUsize,
    failed: AtomicUsize,
    not_results: AtomicUsize,
    args: Mutex<Vec<String>>,
}

impl Advice<Outcome> for Stats {
    async fn around(&self, _call: Call, next: Next<'_, Outcome>) -> Outcome {
        self.args.lock().unwrap().push(format!("{:?}", next.args()));
        let outcome = next.run().await;
        self.calls.fetch_add(1, Ordering::Relaxed);
        match outcome.failed() {
            Some(true) => self.failed.fetch_add(1, Ordering::Relaxed),
            Some(false) => 0,
            None => self.not_results.fetch_add(1, Ordering::Relaxed),
        };
        outcome
    }
}

crosscut!(Stats, types = "Books|Stats", methods = "ledger|close|snapshot");

/// A join point that `Stats`' own crosscut selects by name: never advised by `Stats` itself.
#[intercept]
impl Stats {
    pub async fn snapshot(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

#[tokio::test]
async fn a_crosscut_sees_the_arguments_and_whether_the_call_failed() {
    let app = App::builder().build().await.unwrap();
    let books = app.get_object::<Books>().unwrap();
    let out = app.run_in_context(async { (books.ledger(0).await, books.ledger(1).await, books.close().await) }).await;
    assert_eq!(out, (Err("no year 0".to_owned()), Ok(1), ()));
    let stats = app.get_object::<Stats>().unwrap();
    assert_eq!(stats.calls.load(Ordering::Relaxed), 3);
    assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
    assert_eq!(stats.not_results.load(Ordering::Relaxed), 1);
    assert_eq!(*stats.args.lock().unwrap(), ["ledger { year: 0 }", "ledger { year: 1 }", "close"]);
    assert_eq!(app.run_in_context(stats.snapshot()).await, 3, "an advice ran around its own method");
    assert_eq!(stats.calls.load(Ordering::Relaxed), 3);
}

/// A request's object: which request it is.
#[context_proto]
#[derive(Default)]
pub struct RequestId {
    id: AtomicUsize,
}

/// A crosscut's advice that is a context proto: one per request, reading the request's id.
#[context_proto]
pub struct PerRequest {
    #[inject]
    request: ContextRef<RequestId>,
    calls: AtomicUsize,
}

impl<R> Advice<R> for PerRequest {
    async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
        let id = self.request.get().id.load(Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        tokio::task::yield_now().await;
        let out = next.run().await;
        assert_eq!(self.request.get().id.load(Ordering::Relaxed), id, "a request saw another's object");
        out
    }
}

crosscut!(PerRequest, implements = dyn Audited, methods = "pay");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_advice_of_a_crosscut_is_the_requests_own_under_concurrency() {
    let app = Arc::new(App::builder().build().await.unwrap());
    let payroll = app.get_object::<Payroll>().unwrap();
    // Inside `logged`: the calls log, and the other tests read the log alone.
    let (n, seen) = logged(async {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..1_000usize {
            let (app, payroll) = (app.clone(), payroll.clone());
            tasks.spawn(async move {
                app.run_in_context(async {
                    app.get_object::<RequestId>().unwrap().id.store(i, Ordering::Relaxed);
                    for _ in 0..3 {
                        payroll.pay("x").await;
                    }
                    app.get_object::<PerRequest>().unwrap().calls.load(Ordering::Relaxed)
                })
                .await
            });
        }
        let mut n = 0;
        while let Some(calls) = tasks.join_next().await {
            assert_eq!(calls.unwrap(), 3, "a request's advice counted another's calls");
            n += 1;
        }
        n
    })
    .await;
    assert_eq!(n, 1_000);
    // Audit and PerRequest around each of the 3,000 calls, with the body between.
    assert_eq!(seen.iter().filter(|l| l.starts_with("body pay")).count(), 3_000);
}

#[tokio::test]
async fn check_accepts_the_crosscuts_and_an_app_of_roots_builds_their_advices() {
    App::builder().check().unwrap();
    let app = App::builder().root::<Payroll>().build().await.unwrap();
    let payroll = app.get_object::<Payroll>().unwrap();
    let (out, seen) = logged(app.run_in_context(payroll.pay("bo"))).await;
    assert_eq!(out, "paid bo");
    assert_eq!(seen, ["enter Audit pay", "body pay bo", "leave Audit pay"]);
}

#[tokio::test]
async fn outside_a_scope_or_in_an_app_without_the_advice_the_method_runs_unadvised() {
    let app = App::builder().build().await.unwrap();
    let payroll = app.get_object::<Payroll>().unwrap();
    let (out, seen) = logged(payroll.pay("outside")).await;
    assert_eq!(out, "paid outside");
    assert_eq!(seen, ["body pay outside"]);

    // An App built without inventory has only what it links: not the crosscuts' advices.
    let bare = App::builder().without_inventory().link::<Payroll>().build().await.unwrap();
    let payroll = bare.get_object::<Payroll>().unwrap();
    let (out, seen) = logged(bare.run_in_context(payroll.pay("bare"))).await;
    assert_eq!(out, "paid bare");
    assert_eq!(seen, ["body pay bare"]);
}

/// `Audited`, but registered by hand: crosscuts choose from what `inventory` holds, so its
/// join points would run without `Audit`, and `build()` says so.
pub struct Manual;
impl Audited for Manual {}

#[intercept]
impl Manual {
    pub async fn work(&self) {}
}

#[tokio::test]
async fn a_proto_providing_the_trait_by_hand_is_refused_rather_than_left_unadvised() {
    let manual = tegu_core::ProtoDef::singleton::<Manual>(|_| Ok(Manual))
        .provides::<Manual, dyn Audited>(|m| m as Arc<dyn Audited>);
    let error = App::builder().register(manual).check().unwrap_err().to_string();
    assert!(
        error.contains("`advice_crosscuts::Manual (\"manual\")` is selected by the crosscut of `Audit`"),
        "{error}"
    );
}

/// Panics around `flaky_boom(true)` before the method runs, and waits before `flaky_slow`;
/// counts its calls that were dropped before they finished.
#[singleton_proto]
#[derive(Default)]
pub struct Flaky {
    dropped: AtomicUsize,
}

/// Counts a drop that `disarm` did not prevent: the advice's future dropped mid-call.
struct DropCount<'a>(&'a AtomicUsize, bool);

impl Drop for DropCount<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<R> Advice<R> for Flaky {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let mut armed = DropCount(&self.dropped, true);
        if format!("{:?}", next.args()).contains("boom: true") {
            panic!("the advice around {} failed", call.method());
        }
        if call.method() == "flaky_slow" {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let out = next.run().await;
        armed.1 = false;
        out
    }
}

crosscut!(Flaky, types = "Risky", methods = "flaky_*");

#[singleton_proto]
#[derive(Default)]
pub struct Risky {
    bodies: AtomicUsize,
}

#[intercept]
impl Risky {
    pub async fn flaky_boom(&self, boom: bool) -> u8 {
        self.bodies.fetch_add(1, Ordering::Relaxed);
        u8::from(boom)
    }

    pub async fn flaky_slow(&self) -> u8 {
        self.bodies.fetch_add(1, Ordering::Relaxed);
        2
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_advice_fails_its_call_only_and_the_next_calls_run() {
    let app = Arc::new(App::builder().build().await.unwrap());
    let risky = app.get_object::<Risky>().unwrap();
    let (app2, risky2) = (app.clone(), risky.clone());
    let failed = tokio::spawn(async move { app2.run_in_context(risky2.flaky_boom(true)).await }).await;
    let panic = failed.expect_err("the advice panicked").into_panic();
    assert_eq!(panic.downcast_ref::<String>().map(String::as_str), Some("the advice around flaky_boom failed"));
    assert_eq!(risky.bodies.load(Ordering::Relaxed), 0, "the method ran after its advice panicked");
    // The next calls, concurrent, are advised and run as before.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let (app, risky) = (app.clone(), risky.clone());
        tasks.spawn(async move { app.run_in_context(risky.flaky_boom(false)).await });
    }
    while let Some(out) = tasks.join_next().await {
        assert_eq!(out.unwrap(), 0);
    }
    assert_eq!(risky.bodies.load(Ordering::Relaxed), 100);
}

// Paused time: the timeout fires before the advice's sleep however slow the machine.
#[tokio::test(start_paused = true)]
async fn a_call_cancelled_inside_its_crosscut_drops_the_advice_and_runs_no_body() {
    let app = App::builder().build().await.unwrap();
    let (risky, flaky) = (app.get_object::<Risky>().unwrap(), app.get_object::<Flaky>().unwrap());
    let short = std::time::Duration::from_millis(5);
    let cancelled = app.run_in_context(tokio::time::timeout(short, risky.flaky_slow())).await;
    assert!(cancelled.is_err(), "the call was not cancelled");
    assert_eq!(risky.bodies.load(Ordering::Relaxed), 0);
    assert_eq!(flaky.dropped.load(Ordering::Relaxed), 1, "the advice's future was not dropped");
    assert_eq!(app.run_in_context(risky.flaky_slow()).await, 2);
    assert_eq!(flaky.dropped.load(Ordering::Relaxed), 1);
}

/// Runs the first call, keeps its `Outcome` and panics; returns that `Outcome` for the next
/// call without running it.
#[singleton_proto]
#[derive(Default)]
pub struct Replay {
    kept: Mutex<Option<Outcome>>,
}

impl Advice<Outcome> for Replay {
    async fn around(&self, _call: Call, next: Next<'_, Outcome>) -> Outcome {
        let kept = self.kept.lock().unwrap().take();
        if let Some(outcome) = kept {
            return outcome;
        }
        let first = next.run().await;
        *self.kept.lock().unwrap() = Some(first);
        panic!("kept the first call's outcome");
    }
}

crosscut!(Replay, types = "Replayed");

#[singleton_proto]
#[derive(Default)]
pub struct Replayed {
    bodies: AtomicUsize,
}

#[intercept]
impl Replayed {
    pub async fn replayed(&self) -> u8 {
        self.bodies.fetch_add(1, Ordering::Relaxed);
        9
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_returned_without_running_the_call_is_a_panic_naming_the_method() {
    let app = Arc::new(App::builder().build().await.unwrap());
    let replayed = app.get_object::<Replayed>().unwrap();
    for expected in ["kept the first call's outcome", "returned an `Outcome` without running the call"] {
        let (app, replayed) = (app.clone(), replayed.clone());
        let failed = tokio::spawn(async move { app.run_in_context(replayed.replayed()).await }).await;
        let panic = failed.expect_err("the call panicked").into_panic();
        let message =
            panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        let message = message.unwrap_or_default();
        assert!(message.contains(expected), "{message}");
        if expected.starts_with("returned") {
            assert!(message.contains("Replayed::replayed"), "{message}");
        }
    }
    assert_eq!(replayed.bodies.load(Ordering::Relaxed), 1, "the second call's method ran");
}
