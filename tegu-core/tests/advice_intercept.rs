//! `#[intercept]`: order, short circuit, error mapping, advices that are context protos or
//! hold `ContextRef`s, arguments, and what `build()` checks.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{
    App, ContextRef, DiError,
    advice::{Advice, Call, Next},
    context_proto, intercept, singleton_proto,
};

/// What the advices saw, in order.
#[singleton_proto]
#[derive(Default)]
pub struct Journal {
    lines: Mutex<Vec<String>>,
}

impl Journal {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.lines.lock().unwrap())
    }
}

/// One per scope: which request this is.
#[context_proto]
#[derive(Default)]
pub struct RequestId {
    id: AtomicUsize,
}

static NEXT_REQUEST: AtomicUsize = AtomicUsize::new(1);

impl RequestId {
    fn get(&self) -> usize {
        let _ = self.id.compare_exchange(
            0,
            NEXT_REQUEST.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        self.id.load(Ordering::Relaxed)
    }
}

/// Observes any output; sees the request through a `ContextRef`.
#[singleton_proto]
pub struct Outer {
    #[inject]
    journal: Arc<Journal>,
    #[inject]
    request: ContextRef<RequestId>,
}

impl<R> Advice<R> for Outer {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        self.journal.push(format!("outer before {call} {:?} in request {}", next.args(), self.request.get().get()));
        let out = next.run().await;
        self.journal.push("outer after".to_owned());
        out
    }
}

/// A context proto as an advice: one per scope, reached through it.
#[context_proto]
pub struct Inner {
    #[inject]
    journal: Arc<Journal>,
    calls: AtomicUsize,
}

impl<R> Advice<R> for Inner {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        self.journal.push(format!("inner before {} (call {n} of this scope)", call.method()));
        let out = next.run().await;
        self.journal.push("inner after".to_owned());
        out
    }
}

#[derive(Debug, PartialEq)]
pub enum ApiError {
    Forbidden(String),
    Failed(String),
    NotFound,
}

/// Short-circuits negative ids; maps errors.
#[singleton_proto]
pub struct Guard;

impl<T> Advice<Result<T, ApiError>> for Guard {
    async fn around(&self, call: Call, next: Next<'_, Result<T, ApiError>>) -> Result<T, ApiError> {
        if format!("{:?}", next.args()).contains("id: -") {
            return Err(ApiError::Forbidden(call.to_string()));
        }
        next.run().await.map_err(|e| match e {
            ApiError::NotFound => ApiError::Failed(format!("{} found nothing", call.method())),
            other => other,
        })
    }
}

/// Not `Debug`: shown as `_`.
pub struct Secret(#[allow(dead_code)] String);

#[singleton_proto]
pub struct Todos {
    #[inject]
    journal: Arc<Journal>,
}

fn lookup(id: i64) -> Result<i64, ApiError> {
    if id == 0 { Err(ApiError::NotFound) } else { Ok(id * 10) }
}

impl Todos {
    #[intercept(Outer, Inner)]
    pub async fn list(&self, owner: &str, mut limit: usize) -> Vec<String> {
        limit += 1;
        self.journal.push(format!("list {owner} {limit}"));
        vec![owner.to_owned(); limit]
    }

    #[intercept(Guard)]
    pub async fn get(&self, id: i64) -> Result<i64, ApiError> {
        // `?` converts to the method's own output, as without the interceptor.
        let found = lookup(id)?;
        if found > 1000 {
            return Err(ApiError::Failed("too big".into()));
        }
        Ok(found)
    }

    #[intercept(Outer)]
    pub async fn patterns(&self, (a, b): (u8, u8), secret: Secret) -> u8 {
        let _ = secret;
        a + b
    }

    #[intercept(Outer)]
    #[intercept(Guard)]
    pub async fn stacked(&self, id: i64) -> Result<i64, ApiError> {
        self.journal.push(format!("stacked {id}"));
        Ok(id)
    }

    /// No interceptor: the plain method.
    pub async fn plain(&self) -> usize {
        7
    }
}

/// `#[intercept]` on the impl block: every `pub async fn`, before the method's own.
#[singleton_proto]
pub struct Reports {
    #[inject]
    journal: Arc<Journal>,
}

#[intercept(Outer)]
impl Reports {
    pub async fn daily(&self) -> &'static str {
        "daily"
    }

    #[intercept(Inner)]
    pub async fn weekly(&self) -> &'static str {
        "weekly"
    }

    /// Private: not intercepted by the impl's advice.
    async fn private(&self) -> &'static str {
        self.journal.push("private".to_owned());
        "private"
    }

    pub fn sync(&self) -> usize {
        1
    }
}

async fn app() -> App {
    App::builder().build().await.unwrap()
}

#[tokio::test]
async fn advices_run_outermost_first_and_see_the_request() {
    let app = app().await;
    let todos = app.get_object::<Todos>().unwrap();
    let journal = app.get_object::<Journal>().unwrap();
    let (first, second) = app
        .run_in_context(async {
            let first = todos.list("ada", 1).await;
            let second = todos.list("bob", 0).await;
            (first, second)
        })
        .await;
    assert_eq!(first, ["ada", "ada"]);
    assert_eq!(second, ["bob"]);
    let lines = journal.take();
    let request: usize = lines[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        lines,
        [
            format!(
                "outer before advice_intercept::Todos::list list {{ owner: \"ada\", limit: 1 }} in request {request}"
            ),
            "inner before list (call 1 of this scope)".to_owned(),
            "list ada 2".to_owned(),
            "inner after".to_owned(),
            "outer after".to_owned(),
            format!(
                "outer before advice_intercept::Todos::list list {{ owner: \"bob\", limit: 0 }} in request {request}"
            ),
            "inner before list (call 2 of this scope)".to_owned(),
            "list bob 1".to_owned(),
            "inner after".to_owned(),
            "outer after".to_owned(),
        ]
    );
    // Another scope: another request, another `Inner`.
    app.run_in_context(todos.list("cy", 0)).await;
    let lines = journal.take();
    assert!(!lines[0].ends_with(&format!("in request {request}")), "{lines:?}");
    assert_eq!(lines[1], "inner before list (call 1 of this scope)");
    assert_eq!(app.run_in_context(todos.plain()).await, 7);
}

#[tokio::test]
async fn an_advice_short_circuits_and_maps_errors() {
    let app = app().await;
    let todos = app.get_object::<Todos>().unwrap();
    let results = app
        .run_in_context(async { (todos.get(5).await, todos.get(-1).await, todos.get(0).await, todos.get(500).await) })
        .await;
    assert_eq!(results.0, Ok(50));
    assert_eq!(results.1, Err(ApiError::Forbidden("advice_intercept::Todos::get".into())));
    assert_eq!(results.2, Err(ApiError::Failed("get found nothing".into())));
    assert_eq!(results.3, Err(ApiError::Failed("too big".into())));
}

#[tokio::test]
async fn stacked_attributes_and_patterns() {
    let app = app().await;
    let todos = app.get_object::<Todos>().unwrap();
    let journal = app.get_object::<Journal>().unwrap();
    let sum = app.run_in_context(todos.patterns((2, 3), Secret("hunter2".into()))).await;
    assert_eq!(sum, 5);
    let lines = journal.take();
    assert!(lines[0].contains("patterns { (a, b): (2, 3), secret: _ }"), "{lines:?}");
    // Written order: `Outer` (first attribute) outside `Guard`; `Guard` refuses before the body.
    let refused = app.run_in_context(todos.stacked(-4)).await;
    assert_eq!(refused, Err(ApiError::Forbidden("advice_intercept::Todos::stacked".into())));
    let lines = journal.take();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("outer before advice_intercept::Todos::stacked"), "{lines:?}");
    assert_eq!(lines[1], "outer after");
}

#[tokio::test]
async fn an_impl_block_intercepts_its_pub_async_methods_before_their_own_advices() {
    let app = app().await;
    let reports = app.get_object::<Reports>().unwrap();
    let journal = app.get_object::<Journal>().unwrap();
    app.run_in_context(async {
        assert_eq!(reports.daily().await, "daily");
        assert_eq!(reports.weekly().await, "weekly");
        assert_eq!(reports.private().await, "private");
        assert_eq!(reports.sync(), 1);
    })
    .await;
    let lines: Vec<String> =
        journal.take().into_iter().map(|l| l.split(" in request").next().unwrap().to_owned()).collect();
    assert_eq!(
        lines,
        [
            "outer before advice_intercept::Reports::daily daily",
            "outer after",
            "outer before advice_intercept::Reports::weekly weekly",
            "inner before weekly (call 1 of this scope)",
            "inner after",
            "outer after",
            "private",
        ]
    );
}

#[tokio::test]
async fn intercepted_futures_stay_send() {
    let app = app().await;
    let todos = app.get_object::<Todos>().unwrap();
    // Arguments that borrow (`&str`) too: proving the future `Send` needs nothing about the
    // closures inside it.
    let handle = tokio::spawn(app.run_in_context(async move { (todos.get(3).await, todos.list("ada", 0).await) }));
    assert_eq!(handle.await.unwrap(), (Ok(30), vec!["ada".to_owned()]));
}

#[tokio::test]
async fn outside_a_scope_the_call_panics_naming_the_method_and_advice() {
    let app = app().await;
    let todos = app.get_object::<Todos>().unwrap();
    let panic = tokio::spawn(async move { todos.get(1).await }).await.unwrap_err().into_panic();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(
        message.starts_with(
            "`advice_intercept::Todos::get` is intercepted by `advice_intercept::Guard`, which is reached through the context scope"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn an_excluded_advice_fails_build_naming_the_method() {
    let error = App::builder().exclude::<Guard>().build().await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("method `get` of module `advice_intercept` (tegu-core/tests/advice_intercept.rs:")
            && message.contains(") is intercepted by `Guard`, but excluded by `AppBuilder::exclude`"),
        "{message}"
    );
    assert!(matches!(error, DiError::AdviceMissing { .. } | DiError::Multiple(_)), "{error:?}");
}

#[tokio::test]
async fn an_app_built_from_roots_builds_the_advices_too() {
    let app = App::builder().root::<Todos>().build().await.unwrap();
    let todos = app.get_object::<Todos>().unwrap();
    assert_eq!(app.run_in_context(todos.get(2)).await, Ok(20));
    assert_eq!(app.run_in_context(todos.list("x", 0)).await, ["x"]);
}
