//! Crosscuts: an advice declared once, with [`crosscut!`](crate::crosscut!), that runs around
//! every method it selects: the `pub async fn`s of impl blocks marked `#[intercept]`, chosen by
//! the trait their proto provides, their module, their type's name or their own name.
//!
//! The selection is made once per program, from what `inventory` holds: each method that a
//! crosscut may advise (a [`JoinPoint`]) finds its crosscuts at its first call and keeps them.
//! A method that none selects then costs one atomic load per call. `build()` checks each
//! crosscut: one that selects nothing, whose advice the App lacks, or that selects a proto none
//! of whose methods can be advised, is an error naming it.
//!
//! A crosscut's advice handles every output, so it sees the method's output as an
//! [`Outcome`]: it runs the rest of the call, and works before and after it (logs, timing,
//! metrics, tracing, throttling); it cannot answer in the method's place. It is reached through
//! one `dyn` call and one allocation per call of an advised method.

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{LazyLock, OnceLock};
use std::task::{Context, Poll};

use super::{Call, Needed, Probe, Proceed, Run, Step};
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::proto::descriptor::short_type_name;

/// The output of a method, as a crosscut's advice sees it: it comes only from running the rest
/// of the call (`next.run().await`), and the advice returns it. Whether the method failed is
/// known when its output is a `Result`.
///
/// # Examples
///
/// An advice for crosscuts counts the calls that failed:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{advice::{Advice, Call, Next, Outcome}};
///
/// #[derive(Default)]
/// struct Failures(AtomicUsize);
///
/// impl Advice<Outcome> for Failures {
///     async fn around(&self, _call: Call, next: Next<'_, Outcome>) -> Outcome {
///         let outcome = next.run().await;
///         if outcome.failed() == Some(true) {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///         outcome
///     }
/// }
/// ```
pub struct Outcome {
    failed: Option<bool>,
}

impl Outcome {
    /// `Some(true)` when the method returned an `Err`, `Some(false)` for an `Ok`, `None` when
    /// its output is no `Result`.
    pub fn failed(&self) -> Option<bool> {
        self.failed
    }
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outcome").field("failed", &self.failed).finish_non_exhaustive()
    }
}

/// Whether a method's output says it failed, for [`Outcome::failed`]: `Some` for a `Result`
/// (`(&&Probe(&output)).failed()`, with [`ShowFailed`] and [`ShowNoFailure`] in scope).
#[doc(hidden)]
pub trait ShowFailed {
    fn failed(&self) -> Option<bool>;
}

impl<T, E> ShowFailed for &Probe<'_, Result<T, E>> {
    fn failed(&self) -> Option<bool> {
        Some(self.0.is_err())
    }
}

#[doc(hidden)]
pub trait ShowNoFailure {
    fn failed(&self) -> Option<bool>;
}

impl<T> ShowNoFailure for Probe<'_, T> {
    fn failed(&self) -> Option<bool> {
        None
    }
}

/// How a crosscut's advice runs, erased: the advice object, the call, and the rest of the
/// chain. `crosscut!` writes one for its advice, where the advice's type is known.
#[doc(hidden)]
pub type AroundFn = for<'a> fn(AnyArc, Call, Rest<'a>) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// A type named in a `crosscut!`: its id, and how it was written.
#[doc(hidden)]
pub type Named = (fn() -> TypeId, &'static str);

/// A crosscut, as `crosscut!` submits it through `inventory`.
#[doc(hidden)]
pub struct CrosscutDef {
    pub advice: fn() -> TypeId,
    /// The advice's path as written, for messages.
    pub advice_name: &'static str,
    pub params: Option<&'static (dyn Any + Send + Sync)>,
    /// `implements = dyn Trait`: the protos that provide it.
    pub implements: Option<Named>,
    /// `module = "path"`: types defined there or below (`crate::` is the declaring crate).
    pub module: Option<&'static str>,
    /// `types = "glob"`: the type's name, without its path.
    pub types: Option<&'static str>,
    /// `methods = "glob"`: the method's name.
    pub methods: Option<&'static str>,
    /// Where it nests among the crosscuts of a method: lower outside. Equal orders nest in the
    /// order the `crosscut!`s are declared: by `site`, then `file` and `line`.
    pub order: i32,
    pub around: AroundFn,
    /// The module of the `crosscut!` (`module_path!()`).
    pub site: &'static str,
    pub file: &'static str,
    pub line: u32,
}

inventory::collect!(CrosscutDef);

impl fmt::Debug for CrosscutDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrosscutDef").field("advice", &self.advice_name).field("selector", &self.selector()).finish()
    }
}

impl CrosscutDef {
    /// The selector as written: `implements = dyn Audited, methods = "get_*"`.
    fn selector(&self) -> String {
        let mut parts = Vec::new();
        if let Some((_, name)) = self.implements {
            parts.push(format!("implements = {name}"));
        }
        for (key, value) in [("module", self.module), ("types", self.types), ("methods", self.methods)] {
            if let Some(value) = value {
                parts.push(format!("{key} = {value:?}"));
            }
        }
        parts.join(", ")
    }

    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// Whether this crosscut selects `point`. The advice's own methods are never selected: it
    /// would run around itself.
    fn selects(&self, point: &JoinPoint) -> bool {
        let ty = (point.target)();
        ty != (self.advice)()
            && self.implements.is_none_or(|(tr, _)| provides(ty, tr()))
            && self.selects_type((point.target_name)())
            && self.methods.is_none_or(|g| glob(g, point.method))
    }

    /// Whether the `module` and `types` selectors take type `path`.
    fn selects_type(&self, path: &str) -> bool {
        self.module.is_none_or(|m| in_module(path, &resolve_crate(m, self.site)))
            && self.types.is_none_or(|g| glob(g, short_type_name(path)))
    }
}

/// A method that crosscuts may advise: a `pub async fn` of an impl block marked `#[intercept]`.
#[doc(hidden)]
pub struct JoinPoint {
    pub target: fn() -> TypeId,
    pub target_name: fn() -> &'static str,
    pub method: &'static str,
    pub file: &'static str,
    pub line: u32,
    cuts: OnceLock<Box<[&'static CrosscutDef]>>,
}

impl fmt::Debug for JoinPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinPoint({}::{})", (self.target_name)(), self.method)
    }
}

impl JoinPoint {
    /// The join point of `method` of type `target`, declared at `file:line`.
    pub const fn new(
        target: fn() -> TypeId,
        target_name: fn() -> &'static str,
        method: &'static str,
        file: &'static str,
        line: u32,
    ) -> Self {
        JoinPoint { target, target_name, method, file, line, cuts: OnceLock::new() }
    }

    /// The crosscuts around this method, outermost first: chosen at its first call.
    #[inline]
    pub fn cuts(&'static self) -> &'static [&'static CrosscutDef] {
        self.cuts.get_or_init(|| {
            let mut cuts: Vec<&'static CrosscutDef> = crosscuts().filter(|c| c.selects(self)).collect();
            // Equal orders in declaration order, by what the `crosscut!` is written as and where:
            // no type name, whose text the standard library may change between compilers.
            cuts.sort_by_key(|c| (c.order, c.site, c.file, c.line, c.advice_name));
            cuts.into_boxed_slice()
        })
    }
}

/// Where a [`JoinPoint`] is, submitted through `inventory` (the join point is a `static` in the
/// method's body, which reads it at each call).
#[doc(hidden)]
#[derive(Debug)]
pub struct JoinPointSite(pub &'static JoinPoint);

inventory::collect!(JoinPointSite);

fn crosscuts() -> impl Iterator<Item = &'static CrosscutDef> {
    inventory::iter::<CrosscutDef>.into_iter()
}

fn join_points() -> impl Iterator<Item = &'static JoinPoint> {
    inventory::iter::<JoinPointSite>.into_iter().map(|s| s.0)
}

/// Whether the proto of type `ty` registered by the macros provides trait `tr`.
fn provides(ty: TypeId, tr: TypeId) -> bool {
    PROVIDED.contains(&(ty, tr))
}

/// Which registered protos provide which traits, (type, trait), for `implements`.
static PROVIDED: LazyLock<HashSet<(TypeId, TypeId)>> = LazyLock::new(|| {
    let mut provided = HashSet::new();
    if crosscuts().any(|c| c.implements.is_some()) {
        for d in crate::proto::registered::all() {
            let ty = d.type_id();
            provided.extend(d.provides.iter().map(|p| (ty, (p.type_id)())));
        }
    }
    provided
});

/// Runs the call through `cuts`, then through `chain` (the method's own advices and its body)
/// with `args`, which `show` formats for the advices' `Next::args`.
#[doc(hidden)]
pub async fn crosscut<R, A, D, F, Fut>(
    cuts: &'static [&'static CrosscutDef],
    call: Call,
    args: A,
    show: D,
    chain: F,
) -> R
where
    D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result + Send,
    F: FnOnce(A) -> Fut + Send,
    Fut: Future<Output = (R, Option<bool>)> + Send,
    A: Send,
    R: Send,
{
    // The output's place: filled by the method, so whether the call ran is read there, not
    // from the `Outcome` the advices hand back.
    let mut slot: Option<R> = None;
    {
        let fill = |args| {
            let fut = chain(args);
            let slot = &mut slot;
            async move {
                let (output, failed) = fut.await;
                *slot = Some(output);
                Outcome { failed }
            }
        };
        let mut inner = std::pin::pin!(Proceed::new(args, show, fill));
        let mut rest = std::pin::pin!(Rest::Ready { cuts, call, inner: inner.as_mut() });
        Run::from_step(rest.as_mut()).await;
    }
    match slot {
        Some(output) => output,
        None => foreign_outcome(call),
    }
}

#[cold]
#[inline(never)]
fn foreign_outcome(call: Call) -> ! {
    panic!("a crosscut's advice around `{call}` returned an `Outcome` without running the call (one of another call)")
}

/// The crosscuts still to run around a call, then the rest of it: the `Next` each crosscut's
/// advice gets. `Unpin`: it holds only pointers.
#[doc(hidden)]
pub enum Rest<'a> {
    Ready { cuts: &'static [&'static CrosscutDef], call: Call, inner: Pin<&'a mut (dyn Step<Outcome> + Send + 'a)> },
    Running { fut: Pin<Box<dyn Future<Output = Outcome> + Send + 'a>> },
    Inner { inner: Pin<&'a mut (dyn Step<Outcome> + Send + 'a)> },
    Taken,
}

impl fmt::Debug for Rest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rest::Ready { inner, .. } | Rest::Inner { inner } => inner.as_ref().get_ref().as_debug().fmt(f),
            Rest::Running { .. } | Rest::Taken => f.write_str("(moved)"),
        }
    }
}

impl Step<Outcome> for Rest<'_> {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }

    fn replayable(&self) -> bool {
        matches!(self, Rest::Ready { .. })
    }

    fn cancel(self: Pin<&mut Self>) {
        let this = self.get_mut();
        match this {
            Rest::Running { .. } => *this = Rest::Taken,
            Rest::Inner { inner } => inner.as_mut().cancel(),
            Rest::Ready { .. } | Rest::Taken => {}
        }
    }

    fn poll_step(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let this = self.get_mut();
        loop {
            match this {
                Rest::Running { fut } => return fut.as_mut().poll(cx),
                Rest::Inner { inner } => return inner.as_mut().poll_step(cx),
                Rest::Taken => unreachable!("a crosscut's step is left only to be replaced"),
                Rest::Ready { .. } => {
                    let Rest::Ready { cuts, call, inner } = std::mem::replace(this, Rest::Taken) else {
                        unreachable!("matched above")
                    };
                    let Some((cut, rest)) = cuts.split_first() else {
                        *this = Rest::Inner { inner };
                        continue;
                    };
                    let Some(advice) = advice_object(cut, call) else {
                        *this = Rest::Ready { cuts: rest, call, inner };
                        continue;
                    };
                    let with = match cut.params {
                        Some(params) => call.with_params(params),
                        None => call,
                    };
                    *this = Rest::Running { fut: (cut.around)(advice, with, Rest::Ready { cuts: rest, call, inner }) };
                }
            }
        }
    }
}

/// The advice of `cut`, from the current scope's App: `None` outside a scope, or in an App
/// that lacks it (one built `without_inventory`, which `build()` does not check against the
/// program's crosscuts), where the call runs without it. An advice the App has but cannot give
/// now (a context proto with a completion hook, asked for after the completion phase; a
/// constructor that failed) leaves the call running without it too, logged once per method and
/// crosscut: a crosscut only observes, and never makes a method fail that would run without it.
fn advice_object(cut: &'static CrosscutDef, call: Call) -> Option<AnyArc> {
    match crate::scope::handle::with_current_app(|app| app.object_of((cut.advice)(), cut.advice_name))? {
        Ok(obj) => Some(obj),
        Err(DiError::NotFound { .. }) => None,
        Err(error) => {
            unadvised(cut, call, &error);
            None
        }
    }
}

/// Logs, once per method and crosscut, that `call` runs without `cut`'s advice.
#[cold]
fn unadvised(cut: &'static CrosscutDef, call: Call, error: &DiError) {
    static LOGGED: std::sync::Mutex<Vec<(usize, String)>> = std::sync::Mutex::new(Vec::new());
    let key = (std::ptr::from_ref(cut) as usize, call.to_string());
    let mut logged = LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if logged.contains(&key) {
        return;
    }
    tracing::warn!(
        call = %key.1,
        advice = cut.advice_name,
        crosscut = %cut.at(),
        %error,
        "a crosscut's advice cannot be given here; the method runs without it (logged once per method)"
    );
    logged.push(key);
}

/// Checks the program's crosscuts against an App's providers (`providers(trait)`), for
/// `build()` and `check()`: each selects a method, and each proto that an `implements` selects
/// has a method it can advise (a join point; its other selectors may still leave them all
/// out). Returns the advices the selected methods need, which `build()` checks as those of
/// `#[intercept]`s.
pub(crate) fn check(
    providers: &dyn Fn(TypeId) -> Vec<(TypeId, &'static str, String)>,
    errors: &mut Vec<DiError>,
) -> Vec<Needed> {
    let mut needed = Vec::new();
    if crosscuts().next().is_none() {
        return needed; // the usual program: no join point to walk
    }
    let points: Vec<&'static JoinPoint> = join_points().collect();
    let with_points: HashSet<TypeId> = points.iter().map(|p| (p.target)()).collect();
    for cut in crosscuts() {
        let first = points.iter().find(|p| cut.selects(p));
        // The protos the other selectors take that provide the trait but have no join point
        // (their impl blocks were meant, and are not marked), or that crosscuts cannot see
        // provide it (registered by hand, not through `inventory`).
        let unreachable = cut.implements.map_or_else(Vec::new, |(tr, _)| {
            let tr = tr();
            providers(tr)
                .into_iter()
                .filter(|(proto, path, _)| {
                    *proto != (cut.advice)()
                        && cut.selects_type(path)
                        && (!with_points.contains(proto) || !provides(*proto, tr))
                })
                .map(|(_, _, label)| label)
                .collect()
        });
        for proto in &unreachable {
            errors.push(DiError::CrosscutUnreachable {
                advice: cut.advice_name,
                proto: proto.clone(),
                selector: cut.selector(),
                at: cut.at(),
            });
        }
        let Some(first) = first else {
            if unreachable.is_empty() {
                errors.push(DiError::CrosscutMatchesNothing {
                    advice: cut.advice_name,
                    selector: cut.selector(),
                    at: cut.at(),
                });
            }
            continue;
        };
        needed.push(Needed {
            advice: (cut.advice)(),
            advice_name: cut.advice_name,
            module: (first.target_name)(),
            method: first.method,
            at: format!("{}:{}, crosscut at {}", first.file, first.line, cut.at()),
            needs: &[],
            needs_fix: "",
            owner: None,
        });
    }
    needed
}

/// Whether type `path` is defined in module `module` or below it.
fn in_module(path: &str, module: &str) -> bool {
    path.strip_prefix(module).is_some_and(|rest| rest.starts_with("::"))
}

/// `module` with a leading `crate` replaced by the crate of `site` (a `module_path!()`).
fn resolve_crate(module: &str, site: &str) -> String {
    let krate = site.split("::").next().unwrap_or(site);
    match module.strip_prefix("crate") {
        Some(rest) if rest.is_empty() || rest.starts_with("::") => format!("{krate}{rest}"),
        _ => module.to_owned(),
    }
}

/// Whether `name` matches `pattern`: alternatives split by `|`, each with `*` for any text.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    pattern.split('|').any(|alt| glob_one(alt.trim(), name))
}

fn glob_one(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_documented() {
        assert!(glob("get_*", "get_todo"));
        assert!(glob("get_*", "get_"));
        assert!(!glob("get_*", "list"));
        assert!(glob("*", "anything"));
        assert!(glob("place|cancel", "cancel"));
        assert!(!glob("place|cancel", "placed"));
        assert!(glob("*_admin*", "delete_admin_user"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXbY"));
        assert!(!glob("ab*ba", "aba"));
        assert!(glob("*Controller", "TodosController"));
    }

    #[test]
    fn modules_match_at_a_segment_boundary() {
        assert!(in_module("my_app::orders::Orders", "my_app::orders"));
        assert!(in_module("my_app::orders::admin::Audit", "my_app::orders"));
        assert!(!in_module("my_app::orders_old::Orders", "my_app::orders"));
        assert!(!in_module("my_app::orders", "my_app::orders"));
        assert_eq!(resolve_crate("crate::orders", "my_app::web"), "my_app::orders");
        assert_eq!(resolve_crate("crate", "my_app::web"), "my_app");
        assert_eq!(resolve_crate("crates::x", "my_app"), "crates::x");
        assert_eq!(short_type_name("my_app::Repo<my_app::Db>"), "Repo");
    }
}
