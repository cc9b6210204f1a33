//! The model checker's command: runs a range of seeds (a soak, resumable by range), one seed,
//! or a saved scenario, and prints each failure with its seed, invariant, shrunk scenario and
//! the command that replays it, then a summary.
//!
//! ```text
//! cargo run --release -p tegu-datapath -- --db sqlite --from 0 --count 100000
//! cargo run --release -p tegu-datapath -- --db postgres --from 0 --count 20000
//! cargo run --release -p tegu-datapath -- --db sqlite --seed 1234
//! cargo run --release -p tegu-datapath -- --replay target/datapath/sqlite-1234.json
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use tegu_datapath::scenario::{Db, Scenario};
use tegu_datapath::{check_once, generate, save, shrink};

const USAGE: &str = "usage: datapath [--db sqlite|postgres] [--from N] [--count M] [--seed S] [--replay FILE] [--no-shrink] [--shrink-all] [--out DIR] [--stop-at-first]

  --db         the database (default sqlite)
  --from       the first seed (default 0)
  --count      how many seeds (default 100)
  --seed       one seed (the same as --from S --count 1), its scenario printed
  --replay     a saved scenario (JSON) instead of seeds
  --no-shrink  report failures as generated
  --shrink-all shrink every failure (by default, the first failure of each invariant)
  --out        where failing scenarios are written (default target/datapath)
  --stop-at-first  stop at the first failing seed";

fn main() {
    let mut db = Db::Sqlite;
    let (mut from, mut count) = (0u64, 100u64);
    let mut replay: Option<PathBuf> = None;
    let mut shrinking = true;
    let mut shrink_all = false;
    let mut verbose = false;
    let mut stop_at_first = false;
    let mut out = PathBuf::from("target/datapath");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| fail(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--db" => {
                db = match value().as_str() {
                    "sqlite" => Db::Sqlite,
                    "postgres" => Db::Postgres,
                    other => fail(&format!("unknown database {other:?}")),
                }
            }
            "--from" => from = value().parse().unwrap_or_else(|_| fail("--from takes a number")),
            "--count" => count = value().parse().unwrap_or_else(|_| fail("--count takes a number")),
            "--seed" => {
                from = value().parse().unwrap_or_else(|_| fail("--seed takes a number"));
                count = 1;
                verbose = true;
            }
            "--replay" => replay = Some(PathBuf::from(value())),
            "--no-shrink" => shrinking = false,
            "--shrink-all" => shrink_all = true,
            "--stop-at-first" => stop_at_first = true,
            "--out" => out = PathBuf::from(value()),
            "--help" | "-h" => {
                println!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    let scenarios: Box<dyn Iterator<Item = Scenario>> = match &replay {
        Some(path) => {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
            let scenario: Scenario =
                serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
            db = scenario.db;
            verbose = true;
            Box::new(std::iter::once(scenario))
        }
        None => Box::new((from..from.saturating_add(count)).map(move |seed| generate::scenario(seed, db))),
    };
    tegu_datapath::quiet_injected_panics();
    // `DATAPATH_LOG=debug` (or `info`, `warn`, ...): the crates' log lines on stderr.
    if let Ok(level) = std::env::var("DATAPATH_LOG") {
        let level: tracing::Level = level.parse().unwrap_or_else(|_| fail("DATAPATH_LOG takes a level"));
        tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).init();
    }
    let started = Instant::now();
    let (mut ran, mut failed) = (0u64, 0u64);
    let mut by_invariant: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut shrunk: std::collections::BTreeSet<&'static str> = std::collections::BTreeSet::new();
    let mut fired: BTreeMap<String, u64> = BTreeMap::new();
    for scenario in scenarios {
        ran += 1;
        if verbose {
            println!("{scenario}");
        }
        let found = match check_once(&scenario) {
            Ok(found) => found,
            Err(e) => tegu_datapath::Finding {
                scenario: scenario.clone(),
                violations: vec![tegu_datapath::check::Violation {
                    invariant: "no-unexpected-error",
                    detail: format!("the scenario could not run: {e}"),
                }],
                fired: Vec::new(),
            },
        };
        for f in &found.fired {
            // "request 3: the process stopped 14 ms into it" counts as "the process stopped N ms into it".
            let what = f.split(':').nth(1).unwrap_or(f).trim().split(' ');
            let kind = what.map(|w| if w.chars().all(|c| c.is_ascii_digit()) { "N" } else { w }).collect::<Vec<_>>();
            let kind = kind.join(" ");
            *fired.entry(kind).or_default() += 1;
        }
        if verbose {
            println!("faults fired: {:?}", found.fired);
        }
        if found.violations.is_empty() {
            if verbose {
                println!("seed {}: every invariant holds", scenario.seed);
            }
            continue;
        }
        failed += 1;
        let first = found.violations[0].invariant;
        for v in &found.violations {
            *by_invariant.entry(v.invariant).or_default() += 1;
        }
        println!("FAILED seed {} on {:?}:", scenario.seed, db);
        for v in &found.violations {
            println!("  {v}");
        }
        let name = format!("{}-{}", if db == Db::Sqlite { "sqlite" } else { "postgres" }, scenario.seed);
        let (minimal, violations) = if shrinking && replay.is_none() && (shrink_all || shrunk.insert(first)) {
            let (minimal, violations, runs) = shrink(&scenario, first, 400);
            println!(
                "  shrunk in {runs} runs, from {} to {} operations, still breaking {first}:",
                scenario.size(),
                minimal.size()
            );
            for v in &violations {
                println!("    {v}");
            }
            (minimal, violations)
        } else {
            (scenario.clone(), found.violations.clone())
        };
        let _ = violations;
        print!("{}", indent(&minimal.to_string()));
        match save(&minimal, &out, &name) {
            Ok((_, command)) => println!("  replay: {command}"),
            Err(e) => println!("  (could not save the scenario: {e})"),
        }
        if stop_at_first {
            break;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "summary: {ran} scenarios on {db:?} (seeds {from}..{}), {failed} failed {by_invariant:?}, faults fired {fired:?}, {:.1} s ({:.1} ms a scenario)",
        from + ran,
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / ran.max(1) as f64
    );
    if failed > 0 {
        std::process::exit(1);
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

fn fail(why: &str) -> ! {
    eprintln!("datapath: {why}\n{USAGE}");
    std::process::exit(2);
}
