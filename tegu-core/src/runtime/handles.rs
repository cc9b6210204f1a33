//! What the kernel holds for the features above it (floor 3), one handle each, without knowing
//! their types, as tokio's runtime sees each driver through one handle: event handlers,
//! scheduled jobs, hosted services, health checks, the start-up timeline and live
//! configuration ([`Handles`]). The composition root fills them at `build()`; the feature's
//! own module reads its handle.

use std::any::Any;

/// A feature's state in an App: empty when the feature has nothing (no handler, no job, or the
/// feature compiled out), else a value only its own module gives a type to.
#[derive(Default)]
pub(crate) struct Handle(Option<Box<dyn Any + Send + Sync>>);

impl Handle {
    /// A handle on `state`.
    pub(crate) fn new<T: Send + Sync + 'static>(state: T) -> Self {
        Handle(Some(Box::new(state)))
    }

    /// The state, if the feature put a `T` here.
    #[inline]
    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        self.0.as_ref()?.downcast_ref::<T>()
    }
}

/// The features' handles in an App.
#[derive(Default)]
pub(crate) struct Handles {
    /// The `#[event_handler]`s of the singletons (the events feature's).
    pub(crate) events: Handle,
    /// The `#[schedule]` jobs of the singletons and what stops their timers (the schedule
    /// feature's): dropped with the App, which stops them too. Gone with the feature.
    #[cfg(feature = "schedule")]
    pub(crate) jobs: Handle,
    /// The hosted services and what stops them (the hosted feature's).
    pub(crate) hosted: Handle,
    /// The health checks and their last results (the health feature's).
    pub(crate) health: Handle,
    /// The start-up timeline `build()` took (the startup feature's).
    pub(crate) startup: Handle,
    /// The reloadable configuration sections and their versions (the reload feature's).
    pub(crate) live: Handle,
}
