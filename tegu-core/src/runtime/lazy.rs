//! Lazy singletons: built once, by the first that asks.

use crate::erased::AnyArc;
use crate::error::DiError;

std::thread_local! {
    /// The lazy singletons this thread is building: `(app, proto)`.
    static LAZY_BUILDING: std::cell::RefCell<Vec<(u64, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A lazy singleton: built once, by the first that asks (the others wait on the lock).
#[derive(Default)]
pub(crate) struct LazySlot {
    value: std::sync::OnceLock<AnyArc>,
    building: std::sync::Mutex<()>,
}

impl LazySlot {
    /// The value, built now by `build` if this is the first use: `key` (App, proto) marks the
    /// construction on this thread, `label` names the proto if it asks for itself, and `refuse`
    /// (checked under the lock, once no value is there) may still say no.
    pub(crate) fn get_or_build(
        &self,
        key: (u64, usize),
        label: impl Fn() -> String,
        refuse: impl FnOnce() -> Result<(), DiError>,
        build: impl FnOnce() -> Result<AnyArc, DiError>,
    ) -> Result<AnyArc, DiError> {
        if let Some(obj) = self.value.get() {
            return Ok(obj.clone());
        }
        // Its construction asking for itself (through a provider or a context object) would
        // wait on its own lock forever: say so instead.
        if LAZY_BUILDING.with(|b| b.borrow().contains(&key)) {
            return Err(DiError::EagerCycle { chain: vec![label(), label()] });
        }
        struct Building((u64, usize));
        impl Drop for Building {
            fn drop(&mut self) {
                LAZY_BUILDING.with(|b| b.borrow_mut().retain(|x| *x != self.0));
            }
        }
        LAZY_BUILDING.with(|b| b.borrow_mut().push(key));
        let _building_mark = Building(key);
        // Factories run with no lock of ours but this one; dependencies are acyclic, so a lazy
        // singleton never waits for itself.
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(obj) = self.value.get() {
            return Ok(obj.clone());
        }
        refuse()?;
        let obj = build()?;
        Ok(self.value.get_or_init(|| obj).clone())
    }

    /// The value, if it was built: a construction going on now is waited for (it holds the
    /// lock).
    pub(crate) fn built(&self) -> Option<AnyArc> {
        let _built = self.building.lock().unwrap_or_else(|e| e.into_inner());
        self.value.get().cloned()
    }
}
