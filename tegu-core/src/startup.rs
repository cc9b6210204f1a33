//! The start-up timeline: how long each singleton took to build and to initialise, level by
//! level, and the path through the levels that set the total (`App::startup_report`).

use std::fmt;
use std::time::Duration;

/// The `tracing` target of the start-up spans: one span `construct` and one `init` per
/// singleton, with the field `proto` (its label, `my_app::Type ("name")`).
pub const TARGET: &str = "tegu_core::startup";

/// How long one singleton took to start.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProtoTiming {
    /// The proto, as errors name it: `my_app::Type ("name")`.
    pub proto: String,
    /// Its build level: 0 for a proto with no singleton dependency, else one more than its
    /// deepest dependency's.
    pub level: usize,
    /// Its factory or async constructor, from the start of its level's constructions.
    pub construct: Duration,
    /// Its init hook, from the start of its level's hooks (zero without one).
    pub init: Duration,
}

impl ProtoTiming {
    /// Construction and init together.
    pub fn total(&self) -> Duration {
        self.construct + self.init
    }
}

/// What [`App::startup_report`](crate::App::startup_report) returns: each singleton's time, the
/// time of each build level, and the critical path (the slowest proto of each level: the
/// levels run one after the other; in a level, the sync factories one after the other, then the
/// async constructors concurrently, then the init hooks concurrently).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tegu_core::{App, ProtoDef};
///
/// struct Fast;
/// struct Slow;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::singleton::<Fast>(|_| Ok(Fast)))
///     .register(ProtoDef::singleton::<Slow>(|_| Ok(Slow)).on_init(|_: Arc<Slow>| async {
///         tokio::time::sleep(Duration::from_millis(20)).await;
///         Ok(())
///     }))
///     .build()
///     .await?;
/// let report = app.startup_report();
/// assert!(report.slowest().unwrap().proto.contains("Slow"));
/// println!("{report}"); // a table, slowest first
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct StartupReport {
    pub(crate) total: Duration,
    pub(crate) protos: Vec<ProtoTiming>,
    pub(crate) levels: Vec<Duration>,
}

impl StartupReport {
    /// How long `build()` took, from its call until the singletons were built and initialised
    /// (starting the schedules and hosted services, which comes after, is not counted).
    pub fn total(&self) -> Duration {
        self.total
    }

    /// Every singleton built at start, in build order.
    pub fn protos(&self) -> &[ProtoTiming] {
        &self.protos
    }

    /// How long each build level took.
    pub fn levels(&self) -> &[Duration] {
        &self.levels
    }

    /// The slowest singleton.
    pub fn slowest(&self) -> Option<&ProtoTiming> {
        self.protos.iter().max_by_key(|p| p.total())
    }

    /// The slowest singleton of each level, level 0 first: what to make faster to start faster.
    pub fn critical_path(&self) -> Vec<&ProtoTiming> {
        (0..self.levels.len())
            .filter_map(|level| self.protos.iter().filter(|p| p.level == level).max_by_key(|p| p.total()))
            .collect()
    }
}

impl fmt::Display for StartupReport {
    /// The ten slowest singletons, then the critical path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "started {} singletons in {:?} ({} levels)", self.protos.len(), self.total, self.levels.len())?;
        let mut slowest: Vec<&ProtoTiming> = self.protos.iter().collect();
        slowest.sort_by_key(|p| std::cmp::Reverse(p.total()));
        for p in slowest.iter().take(10) {
            writeln!(
                f,
                "  {:>10.1?}  level {:<3} {} (construct {:?}, init {:?})",
                p.total(),
                p.level,
                p.proto,
                p.construct,
                p.init
            )?;
        }
        let path: Vec<&str> = self.critical_path().iter().map(|p| p.proto.as_str()).collect();
        write!(f, "  critical path: {}", path.join(" -> "))
    }
}
