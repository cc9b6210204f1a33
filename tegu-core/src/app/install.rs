//! The features installed once the singletons are built, each from the graph and the
//! singletons: events, schedules, hosted services, health checks, the start-up report, the live
//! configuration and the lineage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::AppBuilder;
use super::construct::Construction;
use super::lifecycle::{provided_singletons, role_provider};
use super::prepare::{Prepared, available};
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::graph::Graph;
use crate::lineage::{LineageSlot, TraceLink};
use crate::runtime::{Handle, Handles};
use crate::scope::deferred::HeldHooks;
use crate::startup::{ProtoTiming, StartupReport};

/// What the features hand the App.
pub(super) struct Installed {
    pub(super) handles: Handles,
    /// The events' hooks that wait for a scope's end, if the App has handlers or a transport.
    pub(super) held: Option<HeldHooks>,
    pub(super) lineage: Box<[LineageSlot]>,
    pub(super) trace_link: Option<Arc<dyn TraceLink>>,
    /// The runtime the hosted services start on, when the App starts them.
    pub(super) runtime: Option<tokio::runtime::Handle>,
}

impl AppBuilder {
    /// Installs every feature, in order, for the singletons `built` made; `live` is the
    /// reloadable configuration, if the App has any.
    pub(super) fn install(
        &self,
        prepared: &Prepared,
        built: &mut Construction<'_>,
        began: Instant,
        live: Option<Arc<crate::reload::Live>>,
    ) -> Result<Installed, DiError> {
        let Prepared { graph, roots, reached, .. } = prepared;
        let timings = (std::mem::take(&mut built.timings), std::mem::take(&mut built.levels));
        let singletons = &built.singletons;
        // Handlers and jobs of the singletons built, and of the lazy ones this App may build
        // (with roots, those the roots reach).
        let available = |p: usize| available(graph, roots, reached.as_deref(), p);
        let mut handles = Handles::default();
        let transport = role_provider::<dyn crate::events::EventTransport>(graph, singletons, "dyn EventTransport")?;
        let held = crate::events::install(&mut handles, graph, available, transport.map(|(_, transport)| transport));
        #[cfg(feature = "schedule")]
        {
            let lock = role_provider::<dyn crate::schedule::ScheduleLock>(graph, singletons, "dyn ScheduleLock")?;
            crate::schedule::install(&mut handles, graph, &prepared.config, available, lock.map(|(_, l)| l))?;
        }
        let runtime = self.install_hosted(&mut handles, graph, singletons)?;
        handles.startup = Handle::new(self.startup_report(timings, began));
        self.install_live(&mut handles, live)?;
        let trace_link = role_provider::<dyn TraceLink>(graph, singletons, "dyn TraceLink")?.map(|(_, link)| link);
        Ok(Installed { handles, held, lineage: lineage_slots(graph), trace_link, runtime })
    }

    /// The hosted services and the health checks; the runtime the services start on, if the
    /// App has some and starts them.
    fn install_hosted(
        &self,
        handles: &mut Handles,
        graph: &Graph,
        singletons: &[Option<AnyArc>],
    ) -> Result<Option<tokio::runtime::Handle>, DiError> {
        let hosted = provided_singletons::<dyn crate::hosted::HostedService>(graph, singletons, "dyn HostedService")?;
        let checks = provided_singletons::<dyn crate::health::HealthCheck>(graph, singletons, "dyn HealthCheck")?;
        let runtime = match hosted.first().filter(|_| self.hosted) {
            Some((label, _, _)) => Some(crate::hosted::can_start(label)?),
            None => None,
        };
        if !hosted.is_empty() {
            crate::hosted::install(handles, hosted.into_iter().map(|(label, _, s)| (label, s)).collect());
        }
        let checks = checks.into_iter().map(|(_, name, c)| (name, c)).collect();
        crate::health::install(handles, checks, self.health_cache);
        Ok(runtime)
    }

    /// What the start took, proto by proto and level by level; each singleton slower than
    /// `slow_start` is logged.
    fn startup_report(&self, (protos, levels): (Vec<ProtoTiming>, Vec<Duration>), began: Instant) -> StartupReport {
        let report = StartupReport { total: began.elapsed(), protos, levels };
        for slow in report.protos().iter().filter(|t| t.total() >= self.slow_start) {
            tracing::warn!(target: crate::startup::TARGET, proto = %slow.proto, took = ?slow.total(), construct = ?slow.construct, init = ?slow.init, "a singleton was slow to start");
        }
        report
    }

    /// The live configuration, and its watch where `watch_config` asks for one.
    fn install_live(&self, handles: &mut Handles, live: Option<Arc<crate::reload::Live>>) -> Result<(), DiError> {
        let Some(live) = live else {
            #[cfg(feature = "watch")]
            if self.watch.is_some() {
                tracing::info!("watch_config: the App has no reloadable configuration section; nothing is watched");
            }
            return Ok(());
        };
        #[cfg(feature = "watch")]
        if let Some(every) = self.watch {
            crate::reload::watch(&live, every)?;
        }
        handles.live = Handle::new(live);
        Ok(())
    }
}

/// The App's lineage types, each with the proto it seeds.
fn lineage_slots(graph: &Graph) -> Box<[LineageSlot]> {
    graph
        .protos
        .iter()
        .enumerate()
        .filter_map(|(p, def)| {
            let (travel, builds) = def.travel?;
            Some(LineageSlot { key: p as u32, travel, builds })
        })
        .collect()
}
