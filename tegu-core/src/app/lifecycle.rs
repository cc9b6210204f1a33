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
use crate::proto::kinds::Lifetime;

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
    if let Some(def) = targets.iter().map(|t| &graph.protos[t.proto]).find(|d| d.scope != Lifetime::Singleton) {
        let scope = if def.scope == Lifetime::Context { "context" } else { "transient" };
        return Err(DiError::MustBeSingleton { proto: def.label_at(), role, scope });
    }
    let in_order = graph.levels.iter().flatten().filter(|&&p| built(p));
    Ok(in_order.filter_map(|&p| targets.iter().find(|t| t.proto == p).map(|&t| (p, t))).collect())
}

/// The start-up deadline passed with `running` still going (`blocked`: holding its thread).
pub(super) fn timed_out(
    graph: &Graph,
    running: &[usize],
    blocked: Option<usize>,
    stage: &str,
    timeout: Duration,
) -> DiError {
    let running: Vec<String> = running
        .iter()
        .map(|&p| match blocked == Some(p) {
            true => format!("{} ({stage}, blocking its thread)", graph.protos[p].label()),
            false => format!("{} ({stage})", graph.protos[p].label()),
        })
        .collect();
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
            proto: graph.protos[p].label_at(),
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

/// How long after a deadline the caller waits for work run on a thread of its own to report
/// before taking it for blocked: the work's own timers fire at the deadline.
const GRACE: Duration = Duration::from_millis(200);

/// Runs `work` on a thread of its own (`Handle::block_on` on a `std::thread`: not one of the
/// runtime's, whose drop would wait for it), the caller waiting for it until `deadline` (and
/// [`GRACE`]): `None` if it has not returned by then, its thread held by code that never yields
/// (a hook stuck in blocking code), which no timer on its own thread could cut. That thread is
/// abandoned: the process may exit while it blocks. A panic of `work` resumes here.
///
/// The caller waits on a blocking thread of the runtime, in real time: a paused clock (tests)
/// then does not jump to the deadline while `work` runs, which the runtime cannot see.
async fn off_thread<T: Send + 'static>(
    runtime: tokio::runtime::Handle,
    work: impl Future<Output = T> + Send + 'static,
    deadline: tokio::time::Instant,
) -> Option<T> {
    let within = deadline.saturating_duration_since(tokio::time::Instant::now()) + GRACE;
    // The caller's subscriber (a thread's own, as tests set) and span go along.
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let work = tracing::Instrument::instrument(work, tracing::Span::current());
    let (done, outcome) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name("di-deadline".into()).spawn(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tracing::dispatcher::with_default(&dispatch, || runtime.block_on(work))
        }));
        let _ = done.send(out);
    });
    if let Err(error) = thread {
        tracing::error!(%error, "no thread for the hooks under a deadline");
        return None;
    }
    match tokio::task::spawn_blocking(move || outcome.recv_timeout(within)).await {
        Ok(Ok(Ok(out))) => Some(out),
        Ok(Ok(Err(panic))) => std::panic::resume_unwind(panic),
        Ok(Err(_)) | Err(_) => None,
    }
}

/// One singleton's destroy hook, ready to run on a thread of its own: the future calls the
/// hook when first polled.
struct Destroy {
    label: String,
    run: std::pin::Pin<Box<dyn Future<Output = Result<(), DiError>> + Send>>,
}

/// What the destroy hooks did so far, shared with the thread that runs them.
#[derive(Default)]
struct Destroyed {
    errors: Vec<DiError>,
    cut: Vec<String>,
    /// The hook running now, by its place in the order.
    running: Option<usize>,
    /// How many hooks were reached (run, cut or skipped).
    reached: usize,
    /// The caller stopped waiting (a hook blocks the thread): run no other hook.
    abandoned: bool,
}

/// Runs the destroy hooks of `order`'s singletons in reverse, all within `within` (with a
/// tokio runtime): the errors, and the hooks cut at the deadline or never run after it. The
/// hooks run on a thread of their own, so that one stuck in blocking code is cut at the
/// deadline too (named as blocking), and the hooks after it are not run.
pub(super) async fn destroy_singletons(
    graph: &Graph,
    singletons: &[Option<AnyArc>],
    order: &[usize],
    within: Duration,
) -> (Vec<DiError>, Vec<String>) {
    let hooks: Vec<Destroy> = order
        .iter()
        .rev()
        .filter_map(|&p| {
            let def = &graph.protos[p];
            let (destroy, obj) = (def.destroy.clone()?, singletons[p].clone()?);
            let (type_name, name) = (def.type_name(), def.name.to_string());
            let run = async move {
                crate::isolate::catch_hook(|| destroy.call(obj)).await.map_err(|source| DiError::Hook {
                    stage: "destroy",
                    type_name,
                    name,
                    source: Arc::from(source),
                })
            };
            Some(Destroy { label: def.label(), run: Box::pin(run) })
        })
        .collect();
    if hooks.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let labels: Vec<String> = hooks.iter().map(|d| d.label.clone()).collect();
    let progress = Arc::new(std::sync::Mutex::new(Destroyed::default()));
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        run_destroys(hooks, None, within, &progress).await;
        let done = std::mem::take(&mut *progress.lock().unwrap_or_else(|e| e.into_inner()));
        return (done.errors, done.cut);
    };
    let deadline = tokio::time::Instant::now() + within;
    let work = {
        let progress = Arc::clone(&progress);
        async move { run_destroys(hooks, Some(deadline), within, &progress).await }
    };
    let finished = off_thread(runtime, work, deadline).await.is_some();
    let mut done = progress.lock().unwrap_or_else(|e| e.into_inner());
    if !finished {
        done.abandoned = true;
        // The hook that never returned holds the thread; the ones after it never ran.
        let next = match done.running {
            Some(blocked) => {
                tracing::error!(proto = %labels[blocked], deadline = ?within, "a destroy hook blocked its thread past the stop deadline; abandoned");
                done.cut.push(format!("{} (destroy hook, blocking its thread)", labels[blocked]));
                blocked + 1
            }
            None => done.reached,
        };
        let not_run = labels[next.min(labels.len())..].iter().map(|label| format!("{label} (destroy hook not run)"));
        done.cut.extend(not_run);
    }
    (std::mem::take(&mut done.errors), std::mem::take(&mut done.cut))
}

/// Runs `hooks` one after the other, each cut at `deadline` (if any), recording in `progress`.
async fn run_destroys(
    hooks: Vec<Destroy>,
    deadline: Option<tokio::time::Instant>,
    within: Duration,
    progress: &std::sync::Mutex<Destroyed>,
) {
    let lock = || progress.lock().unwrap_or_else(|e| e.into_inner());
    for (i, hook) in hooks.into_iter().enumerate() {
        {
            let mut done = lock();
            if done.abandoned {
                return;
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                done.cut.push(format!("{} (destroy hook not run)", hook.label));
                done.reached = i + 1;
                continue;
            }
            done.running = Some(i);
        }
        let run = hook.run;
        let result = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, run).await.ok(),
            None => Some(run.await),
        };
        let mut done = lock();
        if done.abandoned {
            return;
        }
        done.running = None;
        done.reached = i + 1;
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => done.errors.push(e),
            None => {
                tracing::error!(proto = %hook.label, deadline = ?within, "a destroy hook did not finish within the stop deadline; cut");
                done.cut.push(format!("{} (destroy hook)", hook.label));
            }
        }
    }
}

/// A hook's or an async constructor's future.
pub(super) type Fallible<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// What [`join_all`] returns: the outputs and the failures, each in registration order, the
/// protos still running at the deadline (`blocked`: the one whose poll never returned, holding
/// the thread), and how long each finished one took.
pub(super) struct Joined<T> {
    pub(super) done: Vec<(usize, T)>,
    pub(super) failed: Vec<(usize, BoxError)>,
    pub(super) running: Vec<usize>,
    pub(super) blocked: Option<usize>,
    pub(super) took: Vec<(usize, Duration)>,
}

impl<T> Default for Joined<T> {
    fn default() -> Self {
        Joined { done: Vec::new(), failed: Vec::new(), running: Vec::new(), blocked: None, took: Vec::new() }
    }
}

/// Polls every future to completion, or until `deadline` (with a tokio runtime to time it), on
/// a thread of their own: one that never yields (blocking code) holds that thread, not the
/// caller, and is named as blocking at the deadline.
pub(super) async fn join_all<T: Send + 'static>(
    futures: Vec<(usize, Fallible<T>)>,
    deadline: tokio::time::Instant,
) -> Joined<T> {
    if futures.is_empty() {
        return Joined::default();
    }
    let protos: Vec<usize> = futures.iter().map(|(p, _)| *p).collect();
    let shared = Arc::new(std::sync::Mutex::new(Joined::default()));
    let polling = Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
    let work = {
        let (shared, polling) = (Arc::clone(&shared), Arc::clone(&polling));
        let timed = tokio::runtime::Handle::try_current().is_ok();
        async move {
            let began = Instant::now();
            let timer = timed.then(|| tokio::time::sleep_until(deadline));
            let (protos, futures): (Vec<usize>, Vec<Fallible<T>>) = futures.into_iter().unzip();
            let running = crate::join::join_each(
                futures,
                timer,
                |i, result| {
                    let mut joined = shared.lock().unwrap_or_else(|e| e.into_inner());
                    joined.took.push((protos[i], began.elapsed()));
                    match result {
                        Ok(t) => joined.done.push((protos[i], t)),
                        Err(e) => joined.failed.push((protos[i], e)),
                    }
                },
                |i| polling.store(protos[i], std::sync::atomic::Ordering::Relaxed),
            )
            .await;
            running.into_iter().map(|i| protos[i]).collect::<Vec<usize>>()
        }
    };
    let running = match tokio::runtime::Handle::try_current() {
        Ok(runtime) => off_thread(runtime, work, deadline).await,
        Err(_) => Some(work.await),
    };
    let mut joined = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    joined.running = match running {
        Some(running) => running,
        None => {
            joined.blocked = Some(polling.load(std::sync::atomic::Ordering::Relaxed));
            let finished: Vec<usize> =
                joined.done.iter().map(|(p, _)| *p).chain(joined.failed.iter().map(|(p, _)| *p)).collect();
            protos.into_iter().filter(|p| !finished.contains(p)).collect()
        }
    };
    joined.done.sort_by_key(|(p, _)| *p);
    joined.failed.sort_by_key(|(p, _)| *p);
    joined
}
