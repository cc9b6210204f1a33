//! The data path's model checker.
//!
//! It generates scenarios from a seed ([`generate`]): requests as trees of `#[transactional]`
//! calls of every propagation (some on tasks that join the request's transaction, some after
//! the handler returned), writes, reads, failing statements, events of every phase emitted at
//! every point, handlers that succeed, fail or panic, tenants under row-level security, nested
//! scopes of another user or tenant, tenants' objects, one or two instances; with faults: a
//! `COMMIT` cut before it is sent or after its answer (a proxy in front of PostgreSQL), a pool
//! exhausted, SQLite's write lock held by another connection, the broker down, failing or
//! restarted without its store, the process stopped mid-request and built again. It runs each
//! ([`run`]) on SQLite or PostgreSQL, and checks what it observed against a reference model
//! ([`check`], the invariants in [`check::INVARIANTS`]). A failure is shrunk ([`mod@shrink`]) to
//! a minimal scenario that still breaks the invariant, and written where one command replays
//! it.
//!
//! `cargo test -p tegu-datapath` runs the CI budget and the kept scenarios
//! (`regressions/`); `cargo run --release -p tegu-datapath -- --help` runs any number.

pub mod check;
pub mod generate;
pub mod record;
pub mod run;
pub mod scenario;
pub mod shrink;
pub mod world;

use check::Violation;
use scenario::{Db, Scenario};

/// Keeps the panics a scenario injects (a method's, a handler's, a request's) out of the
/// output, and prints the others as the default hook does: a panic the scenario did not ask
/// for is a finding.
pub fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or_default();
            if !message.contains("injected panic") {
                default(info);
            }
        }));
    });
}

/// What checking one scenario found.
#[derive(Debug)]
pub struct Finding {
    /// The scenario as generated.
    pub scenario: Scenario,
    /// What it broke.
    pub violations: Vec<Violation>,
    /// What fired of its faults.
    pub fired: Vec<String>,
}

/// Runs and checks `scenario` once.
///
/// # Errors
///
/// When the scenario cannot run at all (no database).
pub fn check_once(scenario: &Scenario) -> Result<Finding, String> {
    let observed = run::run(scenario)?;
    let violations = check::check(scenario, &observed);
    Ok(Finding { scenario: scenario.clone(), violations, fired: observed.fired })
}

/// Runs and checks the scenario of `seed` on `db`.
///
/// # Errors
///
/// When the scenario cannot run at all (no database).
pub fn check_seed(seed: u64, db: Db) -> Result<Finding, String> {
    check_once(&generate::scenario(seed, db))
}

/// The smallest scenario found, one edit at a time, that still breaks `invariant`, in at most
/// `budget` runs.
pub fn shrink(scenario: &Scenario, invariant: &str, budget: usize) -> (Scenario, Vec<Violation>, usize) {
    let mut current = scenario.clone();
    let mut current_violations = Vec::new();
    let mut runs = 0;
    'smaller: loop {
        for candidate in shrink::candidates(&current) {
            if runs >= budget {
                break 'smaller;
            }
            runs += 1;
            let Ok(found) = check_once(&candidate) else { continue };
            let same: Vec<Violation> = found.violations.into_iter().filter(|v| v.invariant == invariant).collect();
            if !same.is_empty() {
                current = candidate;
                current_violations = same;
                continue 'smaller;
            }
        }
        break;
    }
    (current, current_violations, runs)
}

/// Where a failing scenario is written, and the command that replays it.
pub fn save(scenario: &Scenario, dir: &std::path::Path, name: &str) -> std::io::Result<(std::path::PathBuf, String)> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}.json"));
    let json = serde_json::to_string_pretty(scenario).map_err(std::io::Error::other)?;
    std::fs::write(&path, json + "\n")?;
    let command = format!("cargo run --release -p tegu-datapath -- --replay {}", path.display());
    Ok((path, command))
}
