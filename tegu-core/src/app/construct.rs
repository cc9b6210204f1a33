//! The singletons built at start, one level at a time: the level's constructors (its async
//! ones concurrently), then its init hooks, with what each took for the start-up report.

use std::time::{Duration, Instant};

use tracing::Instrument;

use super::lifecycle::{join_all, timed_out};
use crate::config::Config;
use crate::erased::{AnyArc, BuildFuture, UnitFuture};
use crate::error::DiError;
use crate::graph::Graph;
use crate::proto::factory::Factory;
use crate::resolver::Resolver;
use crate::runtime::AppCell;
use crate::startup::ProtoTiming;

/// What building the levels has made so far: on an error, [`abort`](super::lifecycle::abort)
/// destroys `singletons` as far as `ready` says.
pub(super) struct Construction<'g> {
    graph: &'g Graph,
    /// Each proto's singleton, once built.
    pub(super) singletons: Vec<Option<AnyArc>>,
    /// The singletons whose init hook has run (or that have none).
    pub(super) ready: Vec<usize>,
    /// Each singleton built: its level and what its constructor and init hook took.
    pub(super) timings: Vec<ProtoTiming>,
    /// Where each proto's entry in `timings` is.
    timing_of: Vec<usize>,
    /// What each level took.
    pub(super) levels: Vec<Duration>,
    deadline: tokio::time::Instant,
    start_timeout: Duration,
}

/// What a constructor reads besides the graph: the App's id, its configuration and its cell.
pub(super) struct Surroundings<'a> {
    pub(super) app_id: u64,
    pub(super) config: &'a Config,
    pub(super) cell: &'a AppCell,
}

impl<'g> Construction<'g> {
    pub(super) fn new(graph: &'g Graph, start_timeout: Duration) -> Self {
        Construction {
            graph,
            singletons: vec![None; graph.protos.len()],
            ready: Vec::new(),
            timings: Vec::new(),
            timing_of: vec![usize::MAX; graph.protos.len()],
            levels: Vec::new(),
            deadline: tokio::time::Instant::now() + start_timeout,
            start_timeout,
        }
    }

    /// Builds level `number` (those of its protos that `reached` names, every one without it),
    /// then runs their init hooks.
    pub(super) async fn level(
        &mut self,
        number: usize,
        reached: Option<&[bool]>,
        around: &Surroundings<'_>,
    ) -> Result<(), DiError> {
        let began = Instant::now();
        let graph = self.graph;
        let level: Vec<usize> =
            graph.levels[number].iter().copied().filter(|&p| reached.is_none_or(|r| r[p])).collect();
        self.construct(number, &level, around).await?;
        self.init(&graph.levels[number]).await?;
        self.levels.push(began.elapsed());
        Ok(())
    }

    /// Calls the constructors of `level`: the synchronous ones in turn, then the async ones
    /// together, each under the start's deadline.
    async fn construct(&mut self, number: usize, level: &[usize], around: &Surroundings<'_>) -> Result<(), DiError> {
        let graph = self.graph;
        let mut constructions: Vec<(usize, BuildFuture)> = Vec::new();
        for &p in level {
            let def = &graph.protos[p];
            self.timing_of[p] = self.timings.len();
            self.timings.push(ProtoTiming {
                proto: def.label(),
                level: number,
                construct: Duration::ZERO,
                init: Duration::ZERO,
            });
            let span = tracing::info_span!(target: crate::startup::TARGET, "construct", proto = %def.label());
            let resolver = Resolver {
                graph,
                singletons: &self.singletons,
                app_id: around.app_id,
                proto: p,
                scope: crate::resolver::ScopeAt::None,
                config: around.config,
                cell: around.cell,
                fresh: crate::resolver::Fresh::default(),
            };
            let called = Instant::now();
            let built = span.in_scope(|| match &def.factory {
                Factory::Sync(factory) => factory.call(&resolver).map(Some),
                Factory::Async(factory) => factory.call(&resolver).map(|fut| {
                    constructions.push((p, Box::pin(fut.instrument(span.clone())) as BuildFuture));
                    None
                }),
                Factory::Config(_) => unreachable!("config sections are read before the graph is built"),
                Factory::Fn(_) => unreachable!("the graph holds a descriptor's factory armed (`arm`)"),
            });
            self.timings.last_mut().expect("pushed above").construct = called.elapsed();
            self.singletons[p] = built?;
        }
        // The async constructors of one level run concurrently, like their init hooks.
        let joined = join_all(constructions, self.deadline).await;
        for &(p, took) in &joined.took {
            self.timings[self.timing_of[p]].construct += took;
        }
        for (p, obj) in joined.done {
            self.singletons[p] = Some(obj);
        }
        if !joined.running.is_empty() {
            return Err(timed_out(graph, &joined.running, joined.blocked, "constructor", self.start_timeout));
        }
        match joined.failed.into_iter().next() {
            Some((p, e)) => Err(graph.protos[p].construction_error(e)),
            None => Ok(()),
        }
    }

    /// Runs the init hooks of the singletons of `level` that were built, together, under the
    /// start's deadline; each that finishes is ready.
    async fn init(&mut self, level: &[usize]) -> Result<(), DiError> {
        let graph = self.graph;
        let hooks: Vec<(usize, UnitFuture)> = level
            .iter()
            .filter_map(|&p| {
                let hook = graph.protos[p].init.as_ref()?.call(self.singletons[p].clone()?);
                let span =
                    tracing::info_span!(target: crate::startup::TARGET, "init", proto = %graph.protos[p].label());
                Some((p, Box::pin(hook.instrument(span)) as UnitFuture))
            })
            .collect();
        let joined = join_all(hooks, self.deadline).await;
        for &(p, took) in &joined.took {
            self.timings[self.timing_of[p]].init = took;
        }
        let failed = joined.failed;
        self.ready.extend(level.iter().filter(|p| !failed.iter().any(|(f, _)| f == *p) && !joined.running.contains(p)));
        if !joined.running.is_empty() {
            return Err(timed_out(graph, &joined.running, joined.blocked, "init hook", self.start_timeout));
        }
        match failed.into_iter().next() {
            Some((p, e)) => Err(graph.protos[p].hook_error("init", e)),
            None => Ok(()),
        }
    }
}
