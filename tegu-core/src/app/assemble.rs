//! `AppBuilder::build`: select, validate and index the graph, load configuration, build the
//! singletons level by level, and hand the features their handles.

use std::any::TypeId;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::lifecycle::{abort, join_all, one_of_role, provided_singletons, providers_of, role_provider, timed_out};
use super::{App, AppBuilder};
use crate::config::Config;
use crate::erased::{AnyArc, BuildFuture, UnitFuture};
use crate::error::DiError;
use crate::graph::Graph;
use crate::pending::Pending;
use crate::proto::def::ProtoDef;
use crate::proto::factory::{ConfigDef, Factory, SyncFactory};
use crate::proto::kinds::{InjectKind, Lifetime};
use crate::resolver::Resolver;
use crate::runtime::{AppCell, AppInner, Handles, LazySlot};
use crate::startup::{ProtoTiming, StartupReport};

static NEXT_APP_ID: AtomicU64 = AtomicU64::new(1);

/// The validated graph and what else `build()` constructs it from.
struct Prepared {
    graph: Graph,
    config: Config,
    roots: Vec<(TypeId, &'static str)>,
    /// Which protos `build()` constructs (`None`: every singleton).
    reached: Option<Vec<bool>>,
    /// The reloadable sections, if there are any.
    live: Option<Arc<crate::reload::Live>>,
}

impl AppBuilder {
    /// Validates the graph and builds the singletons in dependency order, running their async
    /// init hooks (those of independent singletons concurrently).
    ///
    /// # Errors
    ///
    /// Every graph error ([`DiError::Missing`], [`DiError::Cycle`], [`DiError::Ambiguous`],
    /// [`DiError::UnknownQualifier`], [`DiError::Duplicate`], [`DiError::ContextByValue`], ...),
    /// several at once as [`DiError::Multiple`]; [`DiError::OverrideUnknown`]; and a failing
    /// factory ([`DiError::Construction`]) or init hook ([`DiError::Hook`]), after destroying the singletons already built.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // `Repo` needs a `Db` that nobody registered: `build()` says so before any request.
    /// let error = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Repo>(|r| { r.arc::<Db>(0)?; Ok(Repo) }).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(error, DiError::Missing { .. }), "{error}");
    /// # Ok(()) }
    /// ```
    pub async fn build(self) -> Result<App, DiError> {
        self.build_boxed().await
    }

    /// `build()`'s work, boxed here: so that tegu-core compiles its state machine and all it
    /// instantiates once, instead of every crate that awaits `build()` (hundreds of functions in
    /// each such crate's debug build, and its link).
    fn build_boxed(self) -> Pin<Box<dyn Future<Output = Result<App, DiError>> + Send>> {
        Box::pin(self.build_app())
    }

    async fn build_app(mut self) -> Result<App, DiError> {
        let began = Instant::now();
        let deadline = tokio::time::Instant::now() + self.start_timeout;
        let Prepared { graph, config, roots, reached, live } = self.prepare()?;
        let id = NEXT_APP_ID.fetch_add(1, Ordering::Relaxed);
        let cell = AppCell::default();
        let mut singletons: Vec<Option<AnyArc>> = vec![None; graph.protos.len()];
        let mut ready: Vec<usize> = Vec::new();
        let stop_timeout = self.stop_timeout;
        let mut timings: Vec<ProtoTiming> = Vec::new();
        let mut levels: Vec<Duration> = Vec::new();
        let mut timing_of: Vec<usize> = vec![usize::MAX; graph.protos.len()];
        for (number, level) in graph.levels.iter().enumerate() {
            let level_began = Instant::now();
            let mut constructions: Vec<(usize, BuildFuture)> = Vec::new();
            for &p in level.iter().filter(|&&p| reached.as_ref().is_none_or(|r| r[p])) {
                let def = &graph.protos[p];
                timing_of[p] = timings.len();
                timings.push(ProtoTiming {
                    proto: def.label(),
                    level: number,
                    construct: Duration::ZERO,
                    init: Duration::ZERO,
                });
                let span = tracing::info_span!(target: crate::startup::TARGET, "construct", proto = %def.label());
                let resolver = Resolver {
                    graph: &graph,
                    singletons: &singletons,
                    app_id: id,
                    proto: p,
                    scope: crate::resolver::ScopeAt::None,
                    config: &config,
                    cell: &cell,
                    fresh: crate::resolver::Fresh::default(),
                };
                let called = Instant::now();
                let built = span.in_scope(|| match &graph.protos[p].factory {
                    Factory::Sync(factory) => factory.call(&resolver).map(Some),
                    Factory::Async(factory) => factory(&resolver).map(|fut| {
                        constructions.push((p, Box::pin(fut.instrument(span.clone())) as BuildFuture));
                        None
                    }),
                    Factory::Config(_) => unreachable!("config sections are read before the graph is built"),
                });
                timings.last_mut().expect("pushed above").construct = called.elapsed();
                match built {
                    Ok(obj) => singletons[p] = obj,
                    Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
                }
            }
            // The async constructors of one level run concurrently, like their init hooks.
            let joined = join_all(constructions, deadline).await;
            for &(p, took) in &joined.took {
                timings[timing_of[p]].construct += took;
            }
            for (p, obj) in joined.done {
                singletons[p] = Some(obj);
            }
            if !joined.running.is_empty() {
                let e = timed_out(&graph, &joined.running, joined.blocked, "constructor", self.start_timeout);
                return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
            }
            if let Some((p, e)) = joined.failed.into_iter().next() {
                let e = graph.protos[p].construction_error(e);
                return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
            }
            let hooks: Vec<(usize, UnitFuture)> = level
                .iter()
                .filter_map(|&p| {
                    let hook = graph.protos[p].init.as_ref()?(singletons[p].clone()?);
                    let span =
                        tracing::info_span!(target: crate::startup::TARGET, "init", proto = %graph.protos[p].label());
                    Some((p, Box::pin(hook.instrument(span)) as UnitFuture))
                })
                .collect();
            let joined = join_all(hooks, deadline).await;
            for &(p, took) in &joined.took {
                timings[timing_of[p]].init = took;
            }
            let failed = joined.failed;
            ready.extend(level.iter().filter(|p| !failed.iter().any(|(f, _)| f == *p) && !joined.running.contains(p)));
            if !joined.running.is_empty() {
                let e = timed_out(&graph, &joined.running, joined.blocked, "init hook", self.start_timeout);
                return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
            }
            if let Some((p, e)) = failed.into_iter().next() {
                let e = graph.protos[p].hook_error("init", e);
                return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
            }
            levels.push(level_began.elapsed());
        }
        let lazy = (0..graph.protos.len())
            .filter(|&p| graph.protos[p].lazy && singletons[p].is_none())
            .map(|p| (p, LazySlot::default()))
            .collect();
        // Handlers and jobs of the singletons built, and of the lazy ones this App may build
        // (with roots, those the roots reach).
        let available = |p: usize| available(&graph, &roots, reached.as_deref(), p);
        let mut handles = Handles::default();
        let held = match role_provider::<dyn crate::events::EventTransport>(&graph, &singletons, "dyn EventTransport") {
            Ok(transport) => {
                crate::events::install(&mut handles, &graph, available, transport.map(|(_, transport)| transport))
            }
            Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
        };
        #[cfg(feature = "schedule")]
        if let Err(e) = role_provider::<dyn crate::schedule::ScheduleLock>(&graph, &singletons, "dyn ScheduleLock")
            .and_then(|lock| crate::schedule::install(&mut handles, &graph, &config, available, lock.map(|(_, l)| l)))
        {
            return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
        }
        let hosted =
            match provided_singletons::<dyn crate::hosted::HostedService>(&graph, &singletons, "dyn HostedService") {
                Ok(hosted) => hosted,
                Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
            };
        let checks = match provided_singletons::<dyn crate::health::HealthCheck>(&graph, &singletons, "dyn HealthCheck")
        {
            Ok(checks) => checks,
            Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
        };
        let runtime = match hosted.first().filter(|_| self.hosted) {
            Some((label, _, _)) => match crate::hosted::can_start(label) {
                Ok(runtime) => Some(runtime),
                Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
            },
            None => None,
        };
        if !hosted.is_empty() {
            crate::hosted::install(&mut handles, hosted.into_iter().map(|(label, _, s)| (label, s)).collect());
        }
        crate::health::install(
            &mut handles,
            checks.into_iter().map(|(_, name, c)| (name, c)).collect(),
            self.health_cache,
        );
        let report = StartupReport { total: began.elapsed(), protos: timings, levels };
        for slow in report.protos().iter().filter(|t| t.total() >= self.slow_start) {
            tracing::warn!(target: crate::startup::TARGET, proto = %slow.proto, took = ?slow.total(), construct = ?slow.construct, init = ?slow.init, "a singleton was slow to start");
        }
        handles.startup = crate::runtime::Handle::new(report);
        if let Some(live) = live {
            #[cfg(feature = "watch")]
            if let Some(Err(e)) = self.watch.map(|every| crate::reload::watch(&live, every)) {
                return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await);
            }
            handles.live = crate::runtime::Handle::new(live);
        } else {
            #[cfg(feature = "watch")]
            if self.watch.is_some() {
                tracing::info!("watch_config: the App has no reloadable configuration section; nothing is watched");
            }
        }
        let trace_link = match role_provider::<dyn crate::lineage::TraceLink>(&graph, &singletons, "dyn TraceLink") {
            Ok(link) => link.map(|(_, link)| link),
            Err(e) => return Err(abort(&graph, &singletons, &ready, e, stop_timeout).await),
        };
        let lineage = graph
            .protos
            .iter()
            .enumerate()
            .filter_map(|(p, def)| {
                let (travel, builds) = def.travel?;
                Some(crate::lineage::LineageSlot { key: p as u32, travel, builds })
            })
            .collect();
        let inner = Arc::new(AppInner {
            id,
            lineage,
            trace_link,
            handles,
            held,
            lazy,
            graph,
            singletons,
            background_timeout: self.background_timeout,
            config,
            cell: cell.clone(),
            drain_scopes_timeout: self.drain_scopes_timeout,
            shut_down: AtomicBool::new(false),
            destroying: AtomicBool::new(false),
            ending: Pending::default(),
            large_scope: std::sync::atomic::AtomicUsize::new(0),
            stop_timeout,
            stopping: AtomicBool::new(false),
            outside_closed: AtomicBool::new(false),
            metrics: crate::telemetry::Metrics::register(),
        });
        let _ = cell.set(Arc::downgrade(&inner));
        #[cfg(feature = "schedule")]
        if self.schedules {
            crate::schedule::start(&inner);
        }
        if let Some(runtime) = runtime {
            crate::hosted::start(&inner, &runtime);
        }
        Ok(App { inner })
    }

    /// Validates what [`build`](Self::build) would build, and builds nothing: the graph, the
    /// configuration sections, the profiles, the overrides, the advices the program names, and
    /// the roles and schedules the App takes at build. It fails with the error `build()` would
    /// fail with before its first factory (the same [`DiError`], naming the same culprit). It
    /// constructs no object and runs no hook; what it cannot know without them (a factory or an
    /// init hook that fails, a start timeout) only `build()` finds.
    ///
    /// A one-line test keeps a broken graph out of CI:
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo;
    ///
    /// // The App's builder, as `main` builds it.
    /// fn app() -> tegu_core::AppBuilder {
    ///     App::builder()
    ///         .without_inventory()
    ///         .register(ProtoDef::singleton::<Repo>(|_| unreachable!("check() builds nothing")).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    /// }
    ///
    /// let error = app().check().unwrap_err();
    /// assert!(matches!(&error, DiError::Missing { wanted, .. } if wanted.ends_with("Db")), "{error}");
    /// assert!(app().register(ProtoDef::singleton::<Db>(|_| unreachable!())).check().is_ok());
    /// ```
    ///
    /// # Errors
    ///
    /// Those of [`build`](Self::build) but [`DiError::Construction`], [`DiError::Hook`] and
    /// [`DiError::StartTimeout`].
    pub fn check(mut self) -> Result<(), DiError> {
        let Prepared { graph, config, roots, reached, .. } = self.prepare()?;
        let built = |p: usize| graph.protos[p].scope == Lifetime::Singleton && reached.as_ref().is_none_or(|r| r[p]);
        // As `build()`'s `available`: a lazy singleton counts where the App may build it.
        let available = |p: usize| available(&graph, &roots, reached.as_deref(), p);
        let mut errors = Vec::new();
        errors.extend(one_of_role::<dyn crate::events::EventTransport>(&graph, built, "dyn EventTransport").err());
        errors.extend(one_of_role::<dyn crate::lineage::TraceLink>(&graph, built, "dyn TraceLink").err());
        #[cfg(feature = "schedule")]
        errors.extend(one_of_role::<dyn crate::schedule::ScheduleLock>(&graph, built, "dyn ScheduleLock").err());
        errors.extend(providers_of::<dyn crate::hosted::HostedService>(&graph, built, "dyn HostedService").err());
        errors.extend(providers_of::<dyn crate::health::HealthCheck>(&graph, built, "dyn HealthCheck").err());
        #[cfg(feature = "schedule")]
        errors.extend(crate::schedule::check(&graph, &config, available).err());
        #[cfg(not(feature = "schedule"))]
        let _ = (&config, available);
        DiError::collect(errors)
    }

    /// What `build()` and `check()` share: the protos selected (inventory, links, registered;
    /// profiles, exclusions, overrides), the configuration read into its sections, the graph
    /// validated and indexed, and which singletons `build()` would construct. Runs no factory
    /// and no hook. Takes the protos, overrides and sources out of `self`.
    fn prepare(&mut self) -> Result<Prepared, DiError> {
        let mut defs: Vec<ProtoDef> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let registered = self.inventory.then(crate::proto::registered::all).into_iter().flatten();
        for descriptor in std::mem::take(&mut self.linked).into_iter().chain(registered) {
            if seen.insert(((descriptor.type_id)(), descriptor.name)) {
                defs.push(descriptor.to_def());
            }
        }
        defs.extend(std::mem::take(&mut self.defs));
        bring_along(&mut defs);

        let mut errors = Vec::new();
        let profile = self.config.profile.clone();
        let mut inactive = select_active(&mut defs, profile.as_deref(), &self.excluded, &mut errors);
        if !self.inventory {
            let lacked = super::left_out::advices_lacked(&defs);
            let advices: Vec<TypeId> = lacked.iter().map(|need| need.advice).collect();
            let left_out = super::left_out::left_out(&defs, &inactive, &advices);
            errors.extend(super::left_out::advices_left_out(lacked, &left_out));
            inactive.extend(left_out.into_iter().map(|(def, links)| (def, super::left_out::inactive_why(&links))));
        }
        let overridden = |ty: TypeId, name: &str| {
            self.overrides.iter().any(|o| o.type_id == ty && o.name.as_deref().is_none_or(|n| n == name))
        };
        let is_live = |d: &ProtoDef| matches!(&d.factory, Factory::Config(c) if c.live.is_some() && !c.instances);
        let sources = defs.iter().any(is_live).then(|| self.config.clone());
        let mut live = None;
        // Every prefix some section or reader takes, read or not (overridden, or of a proto
        // that another profile selects): a key under one of them is not unknown.
        // The prefixes whose keys are read but not here, so not checked: a section or reader of
        // a proto that is overridden or not selected (another profile's, excluded), the keys
        // of jobs, and those declared with `config_known`.
        let mut known = self.config.known.clone();
        // Multi-instance sections: one table per instance under the prefix.
        let templates: Vec<String> = defs
            .iter()
            .filter_map(|d| match &d.factory {
                Factory::Config(section) if section.instances => Some(section.prefix.to_string()),
                _ => None,
            })
            .collect();
        let replaced = defs.iter().filter(|d| overridden(d.type_id, &d.name));
        for def in replaced.chain(inactive.iter().map(|(d, _)| d)) {
            if let Factory::Config(section) = &def.factory {
                known.push(section.prefix.to_string());
            }
            known.extend(def.config_reads.iter().map(|r| r.prefix().to_owned()));
        }
        #[cfg(feature = "schedule")]
        known.extend(crate::schedule::config_keys().map(str::to_owned));
        let config = match std::mem::take(&mut self.config).load() {
            Ok(config) => {
                let mut found = Vec::new();
                let reads = crate::config::recording(|| {
                    found = load_config(&mut defs, &config, overridden, &mut errors);
                    for def in defs.iter().filter(|d| !overridden(d.type_id, &d.name)) {
                        def.config_reads.iter().for_each(|r| r.read(&config));
                    }
                });
                errors.extend(config.unknown_keys(&reads, &known, &templates));
                if let Some(sources) = sources.filter(|_| !found.is_empty()) {
                    for (def, _) in &found {
                        let why = format!("a reloadable section: singletons hold `ConfigRef<{}>`", def.type_name);
                        inactive.push((def.clone(), why));
                    }
                    let (installed, protos) = crate::reload::install(sources, &config, found);
                    defs.extend(protos);
                    live = Some(installed);
                }
                config
            }
            // Sections are not read from a broken source: each would only repeat its error.
            Err(e) => {
                errors.extend(e);
                Config::default()
            }
        };
        defs = expand_instances(defs, &mut inactive);
        for o in std::mem::take(&mut self.overrides) {
            let mut hit = false;
            for def in
                defs.iter_mut().filter(|d| d.type_id == o.type_id && o.name.as_deref().is_none_or(|n| d.name == n))
            {
                let value = o.value.clone();
                def.factory = Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
                def.deps = Cow::Borrowed(&[]);
                def.init = None;
                def.complete = None;
                def.destroy = None;
                hit = true;
            }
            if !hit {
                errors.push(DiError::OverrideUnknown { type_name: o.type_name });
            }
        }
        for o in std::mem::take(&mut self.provider_overrides) {
            let provides = |d: &ProtoDef| d.provides.iter().any(|p| p.type_id == o.type_id);
            let hit = |d: &ProtoDef| provides(d) && o.name.as_deref().is_none_or(|n| d.name == n);
            let mut names: Vec<(Cow<'static, str>, Lifetime)> =
                defs.iter().filter(|d| hit(d)).map(|d| (d.name.clone(), d.scope)).collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            names.dedup_by(|a, b| a.0 == b.0);
            if names.is_empty() {
                let mut providers: Vec<String> = defs.iter().filter(|d| provides(d)).map(ProtoDef::label).collect();
                providers.sort();
                errors.push(DiError::OverrideNoProvider { wanted: o.type_name, name: o.name, providers });
                continue;
            }
            // A replaced proto that provides other traits too stays, for those: only its
            // `U` goes to the fake. One that provides nothing else is gone, and so is one whose
            // own type is `U` (its own type stays its first entry, which lookups by type use).
            defs.retain_mut(|d| {
                if !hit(d) {
                    return true;
                }
                let (own, faked) = (d.type_id, o.type_id);
                let keeps_others = own != faked && d.provides.iter().any(|p| p.type_id != own && p.type_id != faked);
                d.provides.retain(|p| p.type_id != faked);
                keeps_others
            });
            defs.extend(names.into_iter().map(|(name, scope)| (o.fake)(name, scope)));
        }

        for &(ty, wanted, expected) in &self.expected {
            let found: Vec<String> =
                defs.iter().filter(|d| d.provides.iter().any(|p| p.type_id == ty)).map(ProtoDef::label).collect();
            if found.len() < expected {
                errors.push(DiError::ExpectedProviders { wanted, expected, found });
            }
        }
        let graph = Graph::new(defs, &inactive);
        DiError::collect(errors.into_iter().chain(graph.as_ref().err().cloned()).collect())?;
        let graph = graph?;
        let mut roots = std::mem::take(&mut self.roots);
        super::advices::check(&graph, &inactive, &mut roots, self.inventory)?;
        super::emitters::check(&graph)?;
        crate::scope::lineage::check_types(&graph)?;
        let reached = reached_from(&graph, &roots)?;
        Ok(Prepared { graph, config, roots, reached, live })
    }
}

/// Whether the App has singleton `p` for its features (its handlers, its jobs): built by
/// `build()` (`reached`), or lazy and buildable later (with roots, only what they reach, which
/// `reached` already says).
fn available(graph: &Graph, roots: &[(TypeId, &'static str)], reached: Option<&[bool]>, p: usize) -> bool {
    let def = &graph.protos[p];
    def.scope == Lifetime::Singleton && (reached.is_none_or(|r| r[p]) || (def.lazy && roots.is_empty()))
}

/// Which singletons `build()` constructs: with roots, those the roots reach (by value, and
/// through the context and transient protos they reach by reference); else every singleton
/// but the lazy ones no eager proto reaches. `None`: all of them.
fn reached_from(graph: &Graph, roots: &[(TypeId, &'static str)]) -> Result<Option<Vec<bool>>, DiError> {
    let lazy = graph.protos.iter().any(|p| p.lazy);
    if roots.is_empty() && !lazy {
        return Ok(None);
    }
    let mut reached = vec![false; graph.protos.len()];
    let mut stack = Vec::new();
    for &(ty, wanted) in roots {
        let targets = graph.provided.get(&ty).filter(|t| !t.is_empty()).ok_or_else(|| DiError::NotFound {
            wanted,
            name: None,
            near: graph.near(wanted, None),
        })?;
        stack.extend(targets.iter().map(|t| t.proto));
    }
    if roots.is_empty() {
        stack.extend(
            (0..graph.protos.len()).filter(|&p| {
                graph.protos[p].scope == crate::proto::kinds::Lifetime::Singleton && !graph.protos[p].lazy
            }),
        );
    }
    while let Some(p) = stack.pop() {
        if std::mem::replace(&mut reached[p], true) {
            continue;
        }
        for dep in &graph.resolved[p] {
            match dep {
                // Roots reach what they hold references to; without roots, what builds at start
                // is what eager singletons take by value (a lazy one a context proto takes is
                // built when a scope builds that).
                crate::graph::Resolved::Context(crate::graph::Target { proto: c, .. })
                | crate::graph::Resolved::Provider(c)
                    if !roots.is_empty() =>
                {
                    stack.push(*c)
                }
                other => stack.extend(other.construction_targets()),
            }
        }
    }
    Ok(Some(reached))
}

/// Moves the protos of another profile, and the excluded ones, out of `defs`: returned with
/// why, for the errors of the dependencies that only they would provide.
fn select_active(
    defs: &mut Vec<ProtoDef>,
    profile: Option<&str>,
    excluded: &[(TypeId, &'static str)],
    errors: &mut Vec<DiError>,
) -> Vec<(ProtoDef, String)> {
    for &(ty, type_name) in excluded {
        if !defs.iter().any(|d| d.type_id == ty) {
            errors.push(DiError::ExcludeUnknown { type_name });
        }
    }
    let mut inactive = Vec::new();
    defs.retain(|def| {
        let why = if excluded.iter().any(|&(ty, _)| ty == def.type_id) {
            "excluded by `AppBuilder::exclude`".to_owned()
        } else {
            match def.profile.as_deref() {
                Some(p) if Some(p) != profile => {
                    format!("registered for profile \"{p}\" only: activate it with `AppBuilder::profile(\"{p}\")`")
                }
                _ => return true,
            }
        };
        inactive.push((def.clone(), why));
        false
    });
    inactive
}

/// Adds the protos that `defs` bring along ([`ProtoDef::also`]), once each by type and name, and
/// none the App has already; those brought may bring more. One set of what the App has, made
/// at the first proto that brings one: an App without them pays a walk over its protos.
fn bring_along(defs: &mut Vec<ProtoDef>) {
    let mut have: Option<std::collections::HashSet<(TypeId, Cow<'static, str>)>> = None;
    let mut at = 0;
    while at < defs.len() {
        if !defs[at].also.is_empty() {
            let also = defs[at].also.clone();
            let have = have.get_or_insert_with(|| defs.iter().map(|d| (d.type_id, d.name.clone())).collect());
            for make in also.iter() {
                let brought = make();
                if have.insert((brought.type_id, brought.name.clone())) {
                    defs.push(brought);
                }
            }
        }
        at += 1;
    }
}

/// Reads every config section (but those overridden): a section becomes a proto holding its
/// value; a multi-instance one, one proto per table under its prefix (appended; an overridden
/// instance is left for its override); a reloadable one leaves `defs` and is returned with its
/// value, for the live configuration. Works in place: a def is a few hundred bytes, and an
/// App may have tens of thousands.
fn load_config(
    defs: &mut Vec<ProtoDef>,
    config: &Config,
    overridden: impl Fn(TypeId, &str) -> bool,
    errors: &mut Vec<DiError>,
) -> Vec<(ProtoDef, AnyArc)> {
    let value_factory =
        |value: AnyArc| Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
    let mut instances = Vec::new();
    let mut templates = false;
    let mut live = Vec::new();
    for def in defs.iter_mut() {
        let Factory::Config(section) = &def.factory else { continue };
        if !section.instances {
            if !overridden(def.type_id, &def.name) {
                match (section.load)(config, &section.prefix, def.type_name) {
                    Ok(value) if section.live.is_some() => live.push((def.clone(), value)),
                    Ok(value) => def.factory = value_factory(value),
                    // A reloadable section that fails still gets its `ConfigRef` (the build
                    // fails before any factory runs), so that its users show no second error.
                    Err(e) if section.live.is_some() => {
                        errors.push(e);
                        live.push((def.clone(), Arc::new(()) as AnyArc));
                    }
                    Err(e) => errors.push(e),
                }
            }
            continue;
        }
        templates = true;
        let names = match config.instance_names(&section.prefix, def.type_name) {
            Ok(names) => names,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for name in names {
            let mut instance = def.clone();
            if !overridden(def.type_id, &name) {
                match (section.load)(config, &format!("{}.{name}", section.prefix), def.type_name) {
                    Ok(value) => instance.factory = value_factory(value),
                    Err(e) => errors.push(e),
                }
            }
            instance.name = Cow::Owned(name);
            instances.push(instance);
        }
    }
    // Templates leave (their instances replace them), and so do the reloadable sections that
    // are not overridden (each went to `live`, and its `ConfigRef` replaces it).
    if templates || !live.is_empty() {
        let leaves = |d: &ProtoDef, c: &ConfigDef| c.instances || (c.live.is_some() && !overridden(d.type_id, &d.name));
        defs.retain(|d| !matches!(&d.factory, Factory::Config(c) if leaves(d, c)));
    }
    defs.extend(instances);
    live
}

/// Replaces each `instances_of` template with one proto per proto of the type it follows,
/// named like it, whose unqualified dependencies on that type name it. A template may follow
/// another template's type: those are expanded first (a cycle of templates expands to nothing).
fn expand_instances(defs: Vec<ProtoDef>, inactive: &mut Vec<(ProtoDef, String)>) -> Vec<ProtoDef> {
    if defs.iter().all(|d| d.instances_of.is_none()) {
        return defs;
    }
    let (mut templates, mut out): (Vec<ProtoDef>, Vec<ProtoDef>) =
        defs.into_iter().partition(|d| d.instances_of.is_some());
    loop {
        // The templates whose followed type no other pending template produces.
        let ready: Vec<ProtoDef>;
        (ready, templates) = {
            let pending: Vec<TypeId> = templates.iter().map(|t| t.type_id).collect();
            templates.into_iter().partition(|t| t.instances_of.is_some_and(|(of, _)| !pending.contains(&of)))
        };
        if ready.is_empty() {
            for template in templates {
                let why = "its `instances_of` chain comes back to its own type".to_owned();
                inactive.push((template, why));
            }
            break;
        }
        for template in ready {
            let Some((of, of_name)) = template.instances_of else { continue };
            let mut names: Vec<String> = out.iter().filter(|d| d.type_id == of).map(|d| d.name.to_string()).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                let why = format!(
                    "one instance per `{of_name}`, and there is none (for a config section: no table under its prefix)"
                );
                inactive.push((template.clone(), why));
            }
            for name in names {
                let mut instance = template.clone();
                instance.instances_of = None;
                for dep in instance.deps.to_mut().iter_mut() {
                    let follows = matches!(dep.kind, InjectKind::Arc | InjectKind::Optional);
                    if follows && (dep.type_id)() == of && dep.qualifier.is_none() {
                        dep.qualifier = Some(Cow::Owned(name.clone()));
                    }
                }
                instance.name = Cow::Owned(name);
                out.push(instance);
            }
        }
    }
    out
}
