//! The data path's model checker in `cargo test`: a fixed budget of seeds on SQLite and on
//! PostgreSQL (with NATS), and every kept scenario (`regressions/`, each a failure the checker
//! or a review found once) replayed. A failure prints its seed, the invariant, a shrunk
//! scenario and the command that replays it.
//!
//! The soak (any number of seeds, resumable by range) is the `datapath` binary:
//! `cargo run --release -p tegu-datapath -- --help`.

use std::path::Path;

use tegu_datapath::scenario::{Db, Scenario};
use tegu_datapath::{check_once, generate, quiet_injected_panics, save, shrink};

/// Seeds run on SQLite (the in-memory broker, a current-thread runtime).
const SQLITE_SEEDS: u64 = 200;

/// Seeds run on PostgreSQL and NATS, through the fault-injecting proxies.
const POSTGRES_SEEDS: u64 = 120;

/// Runs of the shrinker for a failure found in CI.
const SHRINK_RUNS: usize = 80;

/// Where failing scenarios are written.
fn out() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/datapath")
}

/// Checks `scenario`; its failure, shrunk and saved, as a report.
fn failure_of(scenario: &Scenario) -> Option<String> {
    let found = check_once(scenario).unwrap_or_else(|e| panic!("scenario seed {} could not run: {e}", scenario.seed));
    let first = found.violations.first()?.invariant;
    let mut report = format!("seed {} on {:?} breaks {first}:\n", scenario.seed, scenario.db);
    for v in &found.violations {
        report.push_str(&format!("  {v}\n"));
    }
    let (minimal, violations, runs) = shrink(scenario, first, SHRINK_RUNS);
    let minimal = if violations.is_empty() { scenario.clone() } else { minimal };
    report.push_str(&format!("shrunk in {runs} runs to:\n{minimal}"));
    let name = format!("{}-{}", if scenario.db == Db::Sqlite { "sqlite" } else { "postgres" }, scenario.seed);
    if let Ok((_, command)) = save(&minimal, &out(), &name) {
        report.push_str(&format!("replay: {command}\n"));
    }
    Some(report)
}

fn budget(db: Db, seeds: std::ops::Range<u64>) {
    quiet_injected_panics();
    let failures: Vec<String> = seeds.filter_map(|seed| failure_of(&generate::scenario(seed, db))).collect();
    assert!(failures.is_empty(), "{} scenarios failed:\n{}", failures.len(), failures.join("\n"));
}

/// Whether a PostgreSQL and a NATS server can be had (the test is skipped, with the reason,
/// where not; failed under `DI_TEST_REQUIRE_SERVERS=1`).
fn servers(test: &str) -> bool {
    use tegu_test_support::servers;
    match servers::postgres().and_then(|_| servers::nats()) {
        Ok(_) => true,
        Err(why) => {
            servers::skip(test, why);
            false
        }
    }
}

#[test]
fn the_ci_budget_on_sqlite_breaks_no_invariant() {
    budget(Db::Sqlite, 0..SQLITE_SEEDS);
}

#[test]
fn the_ci_budget_on_postgres_breaks_no_invariant() {
    if servers("the_ci_budget_on_postgres_breaks_no_invariant") {
        budget(Db::Postgres, 0..POSTGRES_SEEDS);
    }
}

#[test]
fn every_kept_scenario_replays_without_breaking_an_invariant() {
    quiet_injected_panics();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("the kept scenarios").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "the kept scenarios are {files:?}");
    let postgres = servers("every_kept_scenario_replays_without_breaking_an_invariant");
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let scenario: Scenario = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if scenario.db == Db::Postgres && !postgres {
            continue;
        }
        if let Some(report) = failure_of(&scenario) {
            failures.push(format!("{}: {report}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
