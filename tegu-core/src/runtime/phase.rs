//! The App's lifecycle: one phase that only moves forward, from serving to destroying its
//! singletons. What each phase stops is said at each; `App::begin_shutdown` and
//! `App::shutdown` are the only code that moves it.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where an App is in its life, in order: each phase holds everything the ones before it
/// stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Built and serving.
    Serving = 0,
    /// The first shutdown signal (`App::begin_shutdown`): still serving, not ready.
    Stopping = 1,
    /// `shutdown` has begun: the App is not live; schedules, reloads and hosted services are
    /// told to stop, and `shutdown` runs once.
    ShuttingDown = 2,
    /// The hosted services have stopped: an event emitted outside a scope is refused (until
    /// then a stopping service may still emit its last batch).
    OutsideClosed = 3,
    /// Scopes, handlers and jobs are done, and the singletons are destroyed: a lazy one is no
    /// longer built (it would never be destroyed).
    Destroying = 4,
}

/// An App's [`Phase`], shared by its tasks.
#[derive(Debug)]
pub(crate) struct Lifecycle(AtomicU8);

impl Default for Lifecycle {
    /// Serving: a built App.
    fn default() -> Self {
        Lifecycle(AtomicU8::new(Phase::Serving as u8))
    }
}

impl Lifecycle {
    /// Whether the App has reached `phase` (or gone past it).
    #[inline]
    pub(crate) fn reached(&self, phase: Phase) -> bool {
        self.0.load(Ordering::Acquire) >= phase as u8
    }

    /// As [`reached`](Self::reached), with the App owned (its `Drop`).
    pub(crate) fn reached_mut(&mut self, phase: Phase) -> bool {
        *self.0.get_mut() >= phase as u8
    }

    /// Moves the App to `phase`; `false` if it was there or past it already (it stays where it
    /// is: a phase never goes back).
    pub(crate) fn advance(&self, phase: Phase) -> bool {
        self.0.fetch_max(phase as u8, Ordering::AcqRel) < phase as u8
    }
}

#[cfg(test)]
mod tests {
    use super::{Lifecycle, Phase};

    #[test]
    fn a_phase_only_moves_forward_and_each_holds_the_ones_before() {
        let mut life = Lifecycle::default();
        assert!(life.reached(Phase::Serving) && !life.reached(Phase::Stopping));
        assert!(life.advance(Phase::ShuttingDown), "a phase may be skipped");
        assert!(life.reached(Phase::Stopping) && life.reached(Phase::ShuttingDown));
        assert!(!life.advance(Phase::Stopping), "a phase never goes back");
        assert!(!life.advance(Phase::ShuttingDown), "a phase is entered once");
        assert!(life.reached(Phase::ShuttingDown) && !life.reached(Phase::OutsideClosed));
        assert!(life.advance(Phase::Destroying));
        assert!(life.reached_mut(Phase::OutsideClosed));
    }
}
