//! What `build()` and `shutdown()` run under their deadlines: the async constructors and init
//! hooks of a level (timed, for the start-up timeline), the destroy hooks, and the singletons
//! found in a role (`dyn HostedService`, `dyn HealthCheck`).

use std::any::TypeId;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::erased::AnyArc;
use crate::error::{BoxError, DiError};
use crate::graph::{Graph, Target};
use crate::proto::kinds::Scope;

/// The singletons that provide `U`, in build order: each's label, its `name` (what a health
/// check is called) or label, and its object as a `U`. A context or transient provider is an
/// error; a singleton `build()` did not build (lazy and unused, or outside the roots) is left
/// out: nothing would use it.
pub(super) fn provided_singletons<U: ?Sized + 'static>(
    graph: &Graph,
    singletons: &[Option<AnyArc>],
    role: &'static str,
) -> Result<Vec<(String, String, Arc<U>)>, DiError> {
    let found = providers_of::<U>(graph, |p| singletons[p].is_some(), role)?;
    Ok(found
        .into_iter()
        .map(|(p, target)| {
            let (def, obj) = (&graph.protos[p], singletons[p].clone().expect("built: `providers_of` asked"));
            (def.label(), def.name.to_string(), crate::resolver::provided_as::<U>(graph, target, obj))
        })
        .collect())
}

/// The protos that provide `U` and that `built` says are built, in build order, with how
/// each provides it. A context or transient provider is an error, built or not.
pub(super) fn providers_of<U: ?Sized + 'static>(
    graph: &Graph,
    built: impl Fn(usize) -> bool,
    role: &'static str,
) -> Result<Vec<(usize, Target)>, DiError> {
    let Some(targets) = graph.provided.get(&TypeId::of::<U>()) else { return Ok(Vec::new()) };
    if let Some(def) = targets.iter().map(|t| &graph.protos[t.proto]).find(|d| d.scope != Scope::Singleton) {
        let scope = if def.scope == Scope::Context { "context" } else { "transient" };
        return Err(DiError::MustBeSingleton { proto: def.label(), role, scope });
    }
    let in_order = graph.levels.iter().flatten().filter(|&&p| built(p));
    Ok(in_order.filter_map(|&p| targets.iter().find(|t| t.proto == p).map(|&t| (p, t))).collect())
}

/// The start-up deadline passed with `running` still going.
pub(super) fn timed_out(graph: &Graph, running: &[usize], stage: &str, timeout: Duration) -> DiError {
    let running: Vec<String> = running.iter().map(|&p| format!("{} ({stage})", graph.protos[p].label())).collect();
    tracing::error!(timeout = ?timeout, running = %running.join(", "), "the App did not start within its start timeout");
    DiError::StartTimeout { timeout, running }
}

/// The one singleton that provides the role `U` (`dyn EventTransport`, `dyn ScheduleLock`),
/// as its label and its object, if there is one: an App has at most one of each.
pub(super) fn role_provider<U: ?Sized + 'static>(
    graph: &Graph,
    singletons: &[Option<AnyArc>],
    role: &'static str,
) -> Result<Option<(String, Arc<U>)>, DiError> {
    let Some((p, target)) = one_of_role::<U>(graph, |p| singletons[p].is_some(), role)? else { return Ok(None) };
    let obj = singletons[p].clone().expect("built: `one_of_role` asked");
    Ok(Some((graph.protos[p].label(), crate::resolver::provided_as::<U>(graph, target, obj))))
}

/// Which proto provides the role `U`, among those `built` says are built: none, or one. More
/// than one is an error naming them; so is a lazy provider left unbuilt (the App takes its
/// roles when it is built) and one that is no singleton. What `build()` and `check()` ask.
pub(super) fn one_of_role<U: ?Sized + 'static>(
    graph: &Graph,
    built: impl Fn(usize) -> bool + Copy,
    role: &'static str,
) -> Result<Option<(usize, Target)>, DiError> {
    let lazy = graph.provided.get(&TypeId::of::<U>()).into_iter().flatten().map(|t| t.proto);
    if let Some(p) = lazy.into_iter().find(|&p| graph.protos[p].lazy && !built(p)) {
        return Err(DiError::Lazy {
            proto: graph.protos[p].label(),
            reason: "it provides a role the App takes when it is built (`dyn EventTransport`, `dyn ScheduleLock`); drop `lazy`",
        });
    }
    match providers_of::<U>(graph, built, role)?.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        several => {
            let providers = several.iter().map(|&(p, _)| graph.protos[p].label()).collect();
            Err(DiError::OneOfRole { role, providers })
        }
    }
}

/// Destroys the singletons that finished init (in reverse), then returns the build error.
pub(super) async fn abort(
    graph: &Graph,
    singletons: &[Option<AnyArc>],
    ready: &[usize],
    error: DiError,
    within: Duration,
) -> DiError {
    let (errors, cut) = destroy_singletons(graph, singletons, ready, within).await;
    if let Err(e) = DiError::collect(errors) {
        tracing::warn!(error = %e, "destroying singletons after a failed build");
    }
    if !cut.is_empty() {
        tracing::warn!(cut = %cut.join(", "), "destroy hooks cut at the stop deadline after a failed build");
    }
    error
}

/// Runs the destroy hooks of `order`'s singletons in reverse, all within `within` (with a
/// tokio runtime): the errors, and the hooks cut at the deadline or never run after it.
pub(super) async fn destroy_singletons(
    graph: &Graph,
    singletons: &[Option<AnyArc>],
    order: &[usize],
    within: Duration,
) -> (Vec<DiError>, Vec<String>) {
    let deadline = tokio::runtime::Handle::try_current().ok().map(|_| tokio::time::Instant::now() + within);
    let mut errors = Vec::new();
    let mut cut = Vec::new();
    for &p in order.iter().rev() {
        let def = &graph.protos[p];
        let (Some(destroy), Some(obj)) = (&def.destroy, &singletons[p]) else { continue };
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            cut.push(format!("{} (destroy hook not run)", def.label()));
            continue;
        }
        let hook = def.run_hook("destroy", || destroy(obj.clone()));
        let result = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, hook).await.ok(),
            None => Some(hook.await),
        };
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => errors.push(e),
            None => {
                tracing::error!(proto = %def.label(), deadline = ?within, "a destroy hook did not finish within the stop deadline; cut");
                cut.push(format!("{} (destroy hook)", def.label()));
            }
        }
    }
    (errors, cut)
}

/// A hook's or an async constructor's future.
pub(super) type Fallible<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// What [`join_all`] returns: the outputs and the failures, each in registration order, the
/// protos still running at the deadline, and how long each finished one took.
pub(super) struct Joined<T> {
    pub(super) done: Vec<(usize, T)>,
    pub(super) failed: Vec<(usize, BoxError)>,
    pub(super) running: Vec<usize>,
    pub(super) took: Vec<(usize, Duration)>,
}

/// Polls every future to completion, or until `deadline` (with a tokio runtime to time it).
pub(super) async fn join_all<T>(futures: Vec<(usize, Fallible<T>)>, deadline: tokio::time::Instant) -> Joined<T> {
    let mut joined = Joined { done: Vec::new(), failed: Vec::new(), running: Vec::new(), took: Vec::new() };
    if futures.is_empty() {
        return joined;
    }
    let began = Instant::now();
    let timer = tokio::runtime::Handle::try_current().ok().map(|_| tokio::time::sleep_until(deadline));
    let (protos, futures): (Vec<usize>, Vec<Fallible<T>>) = futures.into_iter().unzip();
    let running = crate::join::join_each(futures, timer, |i, result| {
        joined.took.push((protos[i], began.elapsed()));
        match result {
            Ok(t) => joined.done.push((protos[i], t)),
            Err(e) => joined.failed.push((protos[i], e)),
        }
    })
    .await;
    joined.running = running.into_iter().map(|i| protos[i]).collect();
    joined.done.sort_by_key(|(p, _)| *p);
    joined.failed.sort_by_key(|(p, _)| *p);
    joined
}
