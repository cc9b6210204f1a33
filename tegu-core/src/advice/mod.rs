//! Interceptors (around advice): `#[intercept(Timing)]` on a method runs the advice `Timing`
//! around each call of it.
//!
//! The method's body becomes the innermost [`Next`]; each advice, outermost first, gets the
//! [`Call`] (which method of which type) and the `Next` that runs the rest of the chain, and
//! returns the method's output. Everything is generic over the advice, the output and the
//! `Next`: no box, no dynamic call, no allocation per call. A method without `#[intercept]`
//! is not touched.

use std::any::{Any, TypeId};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::error::DiError;

pub(crate) mod crosscut;
mod replay;

pub use crosscut::Outcome;
#[doc(hidden)]
pub use replay::Replay;

/// An around advice for methods returning `R`: a proto (so it can inject singletons and
/// `ContextRef`s) that methods name in `#[intercept(..)]`.
///
/// Implement it for every output the advice handles: `impl<R> Advice<R>` for one that only
/// observes (timing, logging), `impl<T, E: From<Forbidden>> Advice<Result<T, E>>` for one that
/// short-circuits with an error, `impl<T, E> Advice<Result<T, E>>` for one that commits on
/// `Ok` and rolls back on `Err`. A method whose output an advice does not handle is a compile
/// error naming both.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}, App};
///
/// /// Counts calls, and refuses negative ids without calling the method.
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Guard { calls: AtomicUsize }
///
/// impl<T: Send> Advice<Result<T, String>> for Guard {
///     async fn around(&self, call: Call, next: Next<'_, Result<T, String>>) -> Result<T, String> {
///         self.calls.fetch_add(1, Ordering::Relaxed);
///         if format!("{:?}", next.args()).contains('-') {
///             return Err(format!("{} refused", call.method()));
///         }
///         next.run().await.map_err(|e| format!("{}: {e}", call.method()))
///     }
/// }
///
/// #[singleton_proto]
/// pub struct Todos;
/// impl Todos {
///     #[intercept(Guard)]
///     pub async fn get(&self, id: i64) -> Result<String, String> {
///         if id == 0 { Err("no todo 0".into()) } else { Ok(format!("todo {id}")) }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let todos = app.get_object::<Todos>()?;
/// // Advices are reached through the context scope, as a request's objects are.
/// app.run_in_context(async {
///     assert_eq!(todos.get(7).await, Ok("todo 7".to_owned()));
///     assert_eq!(todos.get(-1).await, Err("get refused".to_owned()));
///     assert_eq!(todos.get(0).await, Err("get: no todo 0".to_owned()));
/// }).await;
/// assert_eq!(app.get_object::<Guard>()?.calls.load(Ordering::Relaxed), 3);
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot intercept a method returning `{R}`",
    label = "`{Self}` does not implement `Advice<{R}>`",
    note = "an advice is a proto implementing `tegu_core::advice::Advice<R>` for the outputs it handles: `impl<R> Advice<R> for {Self}` handles any"
)]
pub trait Advice<R>: Send + Sync + 'static {
    /// Runs around one call: usually `next.run().await`, with work before and after; it may
    /// also return without running `next` (a short circuit) or change what it returns.
    ///
    /// # Examples
    ///
    /// A cache in front of a method: `around` answers without running `next` when it can.
    ///
    /// ```rust,standalone_crate
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}, App};
    ///
    /// #[singleton_proto]
    /// #[derive(Default)]
    /// pub struct Cache { hits: AtomicUsize }
    ///
    /// impl Advice<u64> for Cache {
    ///     async fn around(&self, _call: Call, next: Next<'_, u64>) -> u64 {
    ///         if format!("{:?}", next.args()).contains("n: 0") {
    ///             self.hits.fetch_add(1, Ordering::Relaxed);
    ///             return 1; // 0! without the call
    ///         }
    ///         next.run().await
    ///     }
    /// }
    ///
    /// #[singleton_proto]
    /// pub struct Maths;
    /// impl Maths {
    ///     #[intercept(Cache)]
    ///     pub async fn factorial(&self, n: u64) -> u64 {
    ///         (1..=n).product()
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().build().await?;
    /// let maths = app.get_object::<Maths>()?;
    /// app.run_in_context(async {
    ///     assert_eq!(maths.factorial(5).await, 120);
    ///     assert_eq!(maths.factorial(0).await, 1);
    /// }).await;
    /// assert_eq!(app.get_object::<Cache>()?.hits.load(Ordering::Relaxed), 1);
    /// # Ok(()) }
    /// ```
    fn around(&self, call: Call, next: Next<'_, R>) -> impl Future<Output = R>;
}

/// The parameters an advice takes where it is named: `#[intercept(RateLimit(per_sec = 10))]`
/// or `crosscut!(RateLimit(per_sec = 10), ..)` builds a `Params` from the fields given and
/// the [`DEFAULT`](Self::DEFAULT)'s others, at compile time, and the advice reads it with
/// [`Call::params_of`].
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Mutex;
/// use tegu_core::{intercept, singleton_proto, advice::{Advice, AdviceParams, Call, Next}, App};
///
/// /// Remembers the label each call was given.
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Tag { seen: Mutex<Vec<String>> }
///
/// pub struct TagParams { pub label: &'static str, pub level: u8 }
///
/// impl AdviceParams for Tag {
///     type Params = TagParams;
///     const DEFAULT: &'static TagParams = &TagParams { label: "none", level: 1 };
/// }
///
/// impl<R> Advice<R> for Tag {
///     async fn around(&self, call: Call, next: Next<'_, R>) -> R {
///         let p = call.params_of::<Tag>();
///         self.seen.lock().unwrap().push(format!("{}:{}:{}", call.method(), p.label, p.level));
///         next.run().await
///     }
/// }
///
/// #[singleton_proto]
/// pub struct Orders;
/// impl Orders {
///     #[intercept(Tag(label = "write"))]
///     pub async fn place(&self) {}
///     #[intercept(Tag)]
///     pub async fn list(&self) {}
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let orders = app.get_object::<Orders>()?;
/// app.run_in_context(async { orders.place().await; orders.list().await }).await;
/// assert_eq!(*app.get_object::<Tag>()?.seen.lock().unwrap(), ["place:write:1", "list:none:1"]);
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "advice `{Self}` takes no parameters",
    label = "`{Self}` does not implement `tegu_core::advice::AdviceParams`",
    note = "name it without parameters, or implement `tegu_core::advice::AdviceParams` for `{Self}` to take `{Self}(name = value)`"
)]
pub trait AdviceParams: 'static {
    /// What the advice reads: a struct whose fields a use of the advice may set.
    type Params: Send + Sync + 'static;
    /// The parameters of a use that sets none, and of the fields a use leaves out.
    const DEFAULT: &'static Self::Params;
}

/// Which method an advice runs around.
///
/// # Examples
///
/// ```
/// use tegu_core::advice::Call;
///
/// // What an advice receives for `Todos::get`; it prints as the path of the method.
/// let call = Call::new("my_app::Todos", "get");
/// assert_eq!(call, Call::new("my_app::Todos", "get"));
/// assert_eq!(format!("calling {call}"), "calling my_app::Todos::get");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Call {
    target: &'static str,
    method: &'static str,
    params: Option<&'static (dyn Any + Send + Sync)>,
}

impl PartialEq for Call {
    /// The same method of the same type (the parameters are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target && self.method == other.method
    }
}

impl Eq for Call {}

impl Call {
    /// The call of `method` on type `target` (a type name as [`std::any::type_name`] gives it).
    /// The macros make these; build one to test an advice by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// let call = tegu_core::advice::Call::new("my_app::Todos", "get");
    /// assert_eq!((call.target(), call.method()), ("my_app::Todos", "get"));
    /// assert_eq!(call.to_string(), "my_app::Todos::get");
    /// ```
    pub const fn new(target: &'static str, method: &'static str) -> Self {
        Call { target, method, params: None }
    }

    /// This call with the advice's parameters: what the method's attribute gave the advice
    /// (`#[transactional(requires_new)]` gives tegu-tx's advice its options). The macros make
    /// these; build one to test an advice by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::advice::Call;
    ///
    /// struct Limit(u32);
    /// static TEN: Limit = Limit(10);
    ///
    /// let call = Call::new("my_app::Todos", "get").with_params(&TEN);
    /// assert_eq!(call.params::<Limit>().map(|l| l.0), Some(10));
    /// assert!(call.params::<String>().is_none()); // not the type it was given
    /// assert!(Call::new("my_app::Todos", "get").params::<Limit>().is_none());
    /// ```
    pub const fn with_params(mut self, params: &'static (dyn Any + Send + Sync)) -> Self {
        self.params = Some(params);
        self
    }

    /// The advice's parameters given for this call, if they are a `P`.
    ///
    /// # Examples
    ///
    /// ```
    /// static NAME: &str = "orders";
    /// let call = tegu_core::advice::Call::new("my_app::Todos", "get").with_params(&NAME);
    /// assert_eq!(call.params::<&str>(), Some(&"orders"));
    /// ```
    pub fn params<P: 'static>(&self) -> Option<&'static P> {
        self.params?.downcast_ref::<P>()
    }

    /// The parameters the use of advice `A` gave (`#[intercept(RateLimit(per_sec = 10))]`),
    /// or `A`'s [defaults](AdviceParams::DEFAULT) when it gave none.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{advice::{AdviceParams, Call}};
    ///
    /// struct RateLimit;
    /// struct Limit { per_sec: u32 }
    /// impl AdviceParams for RateLimit {
    ///     type Params = Limit;
    ///     const DEFAULT: &'static Limit = &Limit { per_sec: 100 };
    /// }
    ///
    /// static TEN: Limit = Limit { per_sec: 10 };
    /// let call = Call::new("my_app::Todos", "get");
    /// assert_eq!(call.params_of::<RateLimit>().per_sec, 100);
    /// assert_eq!(call.with_params(&TEN).params_of::<RateLimit>().per_sec, 10);
    /// ```
    pub fn params_of<A: AdviceParams>(&self) -> &'static A::Params {
        self.params::<A::Params>().unwrap_or(A::DEFAULT)
    }

    /// The type whose method is called, with its module path (`my_app::Todos`).
    ///
    /// # Examples
    ///
    /// ```
    /// let call = tegu_core::advice::Call::new("my_app::Todos", "get");
    /// assert_eq!(call.target(), "my_app::Todos");
    /// ```
    pub const fn target(&self) -> &'static str {
        self.target
    }

    /// The method's name (`get`).
    ///
    /// # Examples
    ///
    /// ```
    /// let call = tegu_core::advice::Call::new("my_app::Todos", "get");
    /// assert_eq!(call.method(), "get");
    /// ```
    pub const fn method(&self) -> &'static str {
        self.method
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.target, self.method)
    }
}

/// The rest of an intercepted call: the advices inside this one, then the method. Run it at
/// most once.
///
/// A concrete type (the chain behind it is reached through one `dyn` reference, pinned in
/// the caller's future, not boxed): an advice's future is `Send` exactly when it holds nothing
/// that is not, and proving it needs nothing about the method.
///
/// # Examples
///
/// ```
/// use tegu_core::{advice::{Advice, Call, Next}};
///
/// /// Logs each call with its arguments and how long it took.
/// struct Timing;
/// impl<R> Advice<R> for Timing {
///     async fn around(&self, call: Call, next: Next<'_, R>) -> R {
///         let args = format!("{:?}", next.args()); // before `run`, which takes them
///         let start = std::time::Instant::now();
///         let output = next.run().await;
///         println!("{call}{args} took {:?}", start.elapsed());
///         output
///     }
/// }
/// ```
pub struct Next<'a, R> {
    step: Pin<&'a mut (dyn Step<R> + Send + 'a)>,
}

impl<'a, R> Next<'a, R> {
    /// The rest of the chain: `step`, which the macros build.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new(step: Pin<&'a mut (dyn Step<R> + Send + 'a)>) -> Self {
        Next { step }
    }

    /// The call's arguments, for logs: `get { id: 7 }`. An argument whose type is not
    /// `Debug` shows as `_`; once the call has run, they show as `(moved)`.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use std::sync::Mutex;
    /// use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}, App};
    ///
    /// /// Remembers the arguments of each call.
    /// #[singleton_proto]
    /// #[derive(Default)]
    /// pub struct Audit { seen: Mutex<Vec<String>> }
    ///
    /// impl<R> Advice<R> for Audit {
    ///     async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
    ///         self.seen.lock().unwrap().push(format!("{:?}", next.args()));
    ///         next.run().await
    ///     }
    /// }
    ///
    /// /// Not `Debug`: shown as `_`.
    /// pub struct Secret(#[allow(dead_code)] String);
    ///
    /// #[singleton_proto]
    /// pub struct Accounts;
    /// impl Accounts {
    ///     #[intercept(Audit)]
    ///     pub async fn login(&self, user: &str, password: Secret) -> bool {
    ///         drop(password);
    ///         user == "ada"
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().build().await?;
    /// let accounts = app.get_object::<Accounts>()?;
    /// let ok = app.run_in_context(accounts.login("ada", Secret("hunter2".into()))).await;
    /// assert!(ok);
    /// let seen = app.get_object::<Audit>()?.seen.lock().unwrap().clone();
    /// assert_eq!(seen.len(), 1);
    /// assert!(seen[0].contains("\"ada\"") && !seen[0].contains("hunter2"), "{seen:?}");
    /// # Ok(()) }
    /// ```
    pub fn args(&self) -> &(dyn fmt::Debug + '_) {
        self.step.as_ref().get_ref().as_debug()
    }

    /// Runs the rest of the chain with the arguments, and returns the method's output.
    ///
    /// # Examples
    ///
    /// An advice that runs the method and changes its output: errors get the method's name.
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}, App};
    ///
    /// #[singleton_proto]
    /// pub struct Named;
    ///
    /// impl<T> Advice<Result<T, String>> for Named {
    ///     async fn around(&self, call: Call, next: Next<'_, Result<T, String>>) -> Result<T, String> {
    ///         next.run().await.map_err(|e| format!("{}: {e}", call.method()))
    ///     }
    /// }
    ///
    /// #[singleton_proto]
    /// pub struct Parser;
    /// impl Parser {
    ///     #[intercept(Named)]
    ///     pub async fn port(&self, text: &str) -> Result<u16, String> {
    ///         text.parse().map_err(|_| format!("`{text}` is no port"))
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().build().await?;
    /// let parser = app.get_object::<Parser>()?;
    /// app.run_in_context(async {
    ///     assert_eq!(parser.port("8080").await, Ok(8080));
    ///     assert_eq!(parser.port("http").await, Err("port: `http` is no port".to_owned()));
    /// }).await;
    /// # Ok(()) }
    /// ```
    #[inline(always)]
    pub fn run(self) -> Run<'a, R> {
        Run { step: self.step }
    }

    /// Runs the rest of the chain once more, with a fresh copy of the arguments: for an
    /// advice that retries a call (tegu-tx's `#[transactional(retry = ..)]`). The first call
    /// starts the chain, as [`run`](Self::run) does; a later one drops what the previous run
    /// left and starts it again. `None` for a later call when the chain cannot run again: the
    /// macros build a chain that can only for an advice use that asks for it (its method's
    /// arguments are then `Clone`, and its receiver `&self`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::advice::{Advice, Call, Next};
    ///
    /// /// Runs a call up to three times while it fails.
    /// struct Again;
    /// impl<T, E> Advice<Result<T, E>> for Again {
    ///     async fn around(&self, _call: Call, mut next: Next<'_, Result<T, E>>) -> Result<T, E> {
    ///         let mut tries = 1;
    ///         loop {
    ///             let Some(run) = next.again() else { unreachable!("started at most once before") };
    ///             match run.await {
    ///                 Err(_) if tries < 3 && next.replayable() => tries += 1,
    ///                 out => return out,
    ///             }
    ///         }
    ///     }
    /// }
    /// ```
    pub fn again(&mut self) -> Option<Run<'_, R>> {
        if self.step.as_mut().rearm() { Some(Run { step: self.step.as_mut() }) } else { None }
    }

    /// Whether [`again`](Self::again) can start the chain once more: it has not started yet,
    /// or it was built to run again.
    pub fn replayable(&self) -> bool {
        self.step.as_ref().get_ref().replayable()
    }

    /// Drops the run of the rest of the chain in progress, if any, with what it holds (a lock,
    /// a connection): for an advice that gave up on it (a timeout) and must not wait for the
    /// method's future to be dropped. Without it, a [`Run`] dropped before it finished leaves
    /// the call's future to be dropped with the method's.
    pub fn cancel(&mut self) {
        self.step.as_mut().cancel();
    }
}

impl<R> fmt::Debug for Next<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next").field("args", self.args()).finish()
    }
}

/// The future of [`Next::run`]: the rest of the chain.
///
/// # Examples
///
/// An advice that races the rest of the call against a timer:
///
/// ```rust,standalone_crate
/// use std::time::Duration;
/// use tegu_core::futures::Run;
/// use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}, App};
///
/// /// Gives up on a call after 100 ms.
/// #[singleton_proto]
/// pub struct Deadline;
///
/// impl<T> Advice<Result<T, String>> for Deadline {
///     async fn around(&self, call: Call, next: Next<'_, Result<T, String>>) -> Result<T, String> {
///         let rest: Run<'_, Result<T, String>> = next.run(); // a future like any other
///         tokio::time::timeout(Duration::from_millis(100), rest)
///             .await
///             .unwrap_or_else(|_| Err(format!("{} timed out", call.method())))
///     }
/// }
///
/// #[singleton_proto]
/// pub struct Slow;
/// impl Slow {
///     #[intercept(Deadline)]
///     pub async fn wait(&self, ms: u64) -> Result<u64, String> {
///         tokio::time::sleep(Duration::from_millis(ms)).await;
///         Ok(ms)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let slow = app.get_object::<Slow>()?;
/// app.run_in_context(async {
///     assert_eq!(slow.wait(1).await, Ok(1));
///     assert_eq!(slow.wait(60_000).await, Err("wait timed out".to_owned()));
/// }).await;
/// # Ok(()) }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Run<'a, R> {
    step: Pin<&'a mut (dyn Step<R> + Send + 'a)>,
}

impl<'a, R> Run<'a, R> {
    /// Runs `step`: the future of a chain that is not an advice's `Next` (a crosscut's).
    pub(crate) fn from_step(step: Pin<&'a mut (dyn Step<R> + Send + 'a)>) -> Self {
        Run { step }
    }
}

impl<R> Future for Run<'_, R> {
    type Output = R;

    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        self.step.as_mut().poll_step(cx)
    }
}

impl<R> fmt::Debug for Run<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run").finish_non_exhaustive()
    }
}

/// One step of an intercepted call, as [`Next`] sees it: its arguments, and running it.
#[doc(hidden)]
pub trait Step<R> {
    /// The step's arguments as `Debug` (`(moved)` once it runs).
    fn as_debug(&self) -> &dyn fmt::Debug;
    /// Starts the step on first poll, then polls it.
    fn poll_step(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R>;
    /// Makes the step ready to start (again): `true` if it is ready, `false` if it has run and
    /// cannot run again.
    fn rearm(self: Pin<&mut Self>) -> bool {
        self.replayable()
    }
    /// Whether [`rearm`](Self::rearm) would make it ready.
    fn replayable(&self) -> bool;
    /// Drops the run in progress, if any: what it holds is released now.
    fn cancel(self: Pin<&mut Self>);
}

pin_project! {
    /// The step the macros build: the arguments, how to show them, and what runs with them,
    /// then the future that runs.
    #[doc(hidden)]
    #[project = ProceedProj]
    #[project_replace = ProceedTaken]
    pub enum Proceed<A, D, F, Fut> {
        Ready { args: A, show: D, run: F },
        Running { #[pin] fut: Fut },
        Done,
    }
}

impl<A, D, F, Fut> Proceed<A, D, F, Fut> {
    /// `run` applied to `args`, which `show` formats.
    #[inline(always)]
    pub fn new(args: A, show: D, run: F) -> Self
    where
        F: FnOnce(A) -> Fut,
    {
        Proceed::Ready { args, show, run }
    }
}

impl<A, D, F, Fut> fmt::Debug for Proceed<A, D, F, Fut>
where
    D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Proceed::Ready { args, show, .. } => show(args, f),
            _ => f.write_str("(moved)"),
        }
    }
}

impl<R, A, D, F, Fut> Step<R> for Proceed<A, D, F, Fut>
where
    D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result,
    F: FnOnce(A) -> Fut,
    Fut: Future<Output = R>,
{
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }

    fn replayable(&self) -> bool {
        matches!(self, Proceed::Ready { .. })
    }

    fn cancel(mut self: Pin<&mut Self>) {
        if matches!(*self, Proceed::Running { .. }) {
            self.set(Proceed::Done);
        }
    }

    #[inline]
    fn poll_step(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        loop {
            match self.as_mut().project() {
                // Left `Running` when done: `Run` is awaited once (`Next::run` takes `Next`),
                // and the finished future is dropped with the step.
                ProceedProj::Running { fut } => return fut.poll(cx),
                ProceedProj::Ready { .. } => {
                    let ProceedTaken::Ready { args, run, .. } = self.as_mut().project_replace(Proceed::Done) else {
                        unreachable!("matched above")
                    };
                    self.set(Proceed::Running { fut: run(args) });
                }
                ProceedProj::Done => panic!("an intercepted call's `Next` was run twice"),
            }
        }
    }
}

/// Ties the type of a [`Proceed`]'s formatter to its arguments'.
#[doc(hidden)]
#[inline(always)]
pub fn shower<A, D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result>(_: &A, show: D) -> D {
    show
}

/// The method's body as the innermost step of a chain: names its output, so that `?` in the
/// body converts to it, and takes the arguments' types from `A`.
#[doc(hidden)]
#[inline(always)]
pub fn body<R, A, Fut: Future<Output = R>, F: FnOnce(A) -> Fut>(_: &A, f: F) -> F {
    f
}

/// [`body`] for a body run more than once ([`Replay`]): a `Fn`, which a closure is only if
/// it is expected to be one where it is written.
#[doc(hidden)]
#[inline(always)]
pub fn body_fn<R, A, Fut: Future<Output = R>, F: Fn(A) -> Fut>(_: &A, f: F) -> F {
    f
}

/// Shows an argument with its `Debug` when it has one, as `_` otherwise: `(&&Probe(x)).shown()`,
/// with [`ShowDebug`] and [`ShowOpaque`] in scope (autoref specialization).
#[doc(hidden)]
#[allow(missing_debug_implementations)]
pub struct Probe<'a, T>(pub &'a T);

#[doc(hidden)]
pub trait ShowDebug {
    fn shown(&self) -> &dyn fmt::Debug;
}

impl<T: fmt::Debug> ShowDebug for &Probe<'_, T> {
    fn shown(&self) -> &dyn fmt::Debug {
        self.0
    }
}

#[doc(hidden)]
pub trait ShowOpaque {
    fn shown(&self) -> &dyn fmt::Debug;
}

impl<T> ShowOpaque for Probe<'_, T> {
    fn shown(&self) -> &dyn fmt::Debug {
        &Opaque
    }
}

struct Opaque;

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("_")
    }
}

/// Where `#[intercept(A)]` is used, submitted through `inventory`: `build()` checks that each
/// advice is registered (and builds it, also for an App built from roots).
#[doc(hidden)]
#[derive(Debug)]
pub struct AdviceSite {
    pub advice: fn() -> TypeId,
    pub advice_name: &'static str,
    /// The module of the intercepted method, for the error.
    pub module: &'static str,
    /// The intercepted method.
    pub method: &'static str,
    /// Where the `#[intercept]` is.
    pub file: &'static str,
    pub line: u32,
    /// What the advice needs of the App for this use (`#[transactional]`: a data source,
    /// the one its `source` names), checked by `build()` and `check()`, and the fix when the
    /// App does not have it.
    pub needs: &'static [crate::proto::Dependency],
    pub needs_fix: &'static str,
    /// The type whose method it is, where the attribute could name it (`#[intercept]` on an
    /// impl block): the use is an App's if that type is. `None` for an attribute on a method
    /// alone, whose use is an App's if the App has a proto of its module.
    pub owner: Option<fn() -> TypeId>,
}

inventory::collect!(AdviceSite);

/// The advice `A` of `call`: a singleton of the current scope's App, or the scope's object of
/// a context proto.
///
/// # Panics
///
/// Outside a context scope, and when the current App has no such proto (built
/// `without_inventory`, or the advice excluded; `build()` refuses the latter otherwise).
///
/// The panic is located at the intercepted method (`#[track_caller]`), not here.
#[inline]
#[track_caller]
#[doc(hidden)]
pub fn advice<A: Send + Sync + 'static>(call: Call) -> Arc<A> {
    match crate::scope::handle::with_current_app(|app| app.object_of(TypeId::of::<A>(), core::any::type_name::<A>())) {
        Some(Ok(obj)) => crate::erased::downcast::<A>(obj),
        Some(Err(error)) => advice_failed(call, core::any::type_name::<A>(), &error),
        None => advice_outside(call, core::any::type_name::<A>()),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn advice_failed(call: Call, advice: &str, error: &DiError) -> ! {
    let short = crate::error::short_type(advice);
    panic!(
        "`{call}` is intercepted by `{advice}`, which this App cannot give: {error}; an App built `without_inventory()` registers it with `.link::<{short}>()`"
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn advice_outside(call: Call, advice: &str) -> ! {
    panic!(
        "`{call}` is intercepted by `{advice}`, which is reached through the context scope, but it was called outside \
         one; call it inside `App::run_in_context` (tegu-http, events and schedules open one)"
    )
}

/// An advice some method needs: named by an `#[intercept]`, or by a crosscut that selects it.
/// `build()` checks that the App has each, and builds it with the roots.
pub(crate) struct Needed {
    pub(crate) advice: TypeId,
    pub(crate) advice_name: &'static str,
    /// The module (or, for a crosscut, the type) of a method that needs it, and that method.
    pub(crate) module: &'static str,
    pub(crate) method: &'static str,
    /// Where it is named: `file:line`.
    pub(crate) at: String,
    /// What the use needs of the App besides the advice, and the fix when it is missing.
    pub(crate) needs: &'static [crate::proto::Dependency],
    pub(crate) needs_fix: &'static str,
    /// The type whose method it is, if known (see [`AdviceSite::owner`]).
    pub(crate) owner: Option<TypeId>,
}

/// The advices `#[intercept]` names anywhere in the program, with where.
pub(crate) fn sites() -> impl Iterator<Item = Needed> {
    inventory::iter::<AdviceSite>.into_iter().map(|site| Needed {
        advice: (site.advice)(),
        advice_name: site.advice_name,
        module: site.module,
        method: site.method,
        at: format!("{}:{}", site.file, site.line),
        needs: site.needs,
        needs_fix: site.needs_fix,
        owner: site.owner.map(|owner| owner()),
    })
}
