//! `AppBuilder::build` and `check`: the steps they share (`prepare`), then, for `build`, the
//! singletons built level by level (`construct`), the features installed (`install`), and the
//! App.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::construct::{Construction, Surroundings};
use super::lifecycle::{abort, one_of_role, providers_of};
use super::prepare::{Prepared, available};
use super::{App, AppBuilder};
use crate::error::DiError;
use crate::pending::Pending;
use crate::proto::kinds::Lifetime;
use crate::runtime::{AppCell, AppInner, LazySlot};

static NEXT_APP_ID: AtomicU64 = AtomicU64::new(1);

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
        let mut prepared = self.prepare()?;
        let live = prepared.live.take();
        let id = NEXT_APP_ID.fetch_add(1, Ordering::Relaxed);
        let cell = AppCell::default();
        let mut built = Construction::new(&prepared.graph, self.start_timeout);
        let around = Surroundings { app_id: id, config: &prepared.config, cell: &cell };
        let installed = async {
            for number in 0..prepared.graph.levels.len() {
                built.level(number, prepared.reached.as_deref(), &around).await?;
            }
            self.install(&prepared, &mut built, began, live)
        }
        .await;
        let installed = match installed {
            Ok(installed) => installed,
            Err(e) => return Err(abort(&prepared.graph, &built.singletons, &built.ready, e, self.stop_timeout).await),
        };
        let singletons = built.singletons;
        let Prepared { graph, config, .. } = prepared;
        let lazy = (0..graph.protos.len())
            .filter(|&p| graph.protos[p].lazy && singletons[p].is_none())
            .map(|p| (p, LazySlot::default()))
            .collect();
        let inner = Arc::new(AppInner {
            id,
            lineage: installed.lineage,
            trace_link: installed.trace_link,
            handles: installed.handles,
            held: installed.held,
            lazy,
            graph,
            singletons,
            background_timeout: self.background_timeout,
            config,
            cell: cell.clone(),
            drain_scopes_timeout: self.drain_scopes_timeout,
            ending: Pending::default(),
            large_scope: std::sync::atomic::AtomicUsize::new(0),
            stop_timeout: self.stop_timeout,
            lifecycle: Default::default(),
            metrics: crate::telemetry::Metrics::register(),
        });
        let _ = cell.set(Arc::downgrade(&inner));
        #[cfg(feature = "schedule")]
        if self.schedules {
            crate::schedule::start(&inner);
        }
        if let Some(runtime) = installed.runtime {
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
}
