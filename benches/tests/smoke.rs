//! The bench binaries run, at N = 10 for about a second each, and print their JSON lines. No figure
//! is asserted: the machine is shared and noisy; RESULTS.md has the measurements.

use std::process::Command;

use benches::stats::field;

fn run(bin: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(bin).args(args).output().expect("the binary runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert!(out.status.success(), "{bin} {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn tegg_bench_prints_a_line_per_flavour_and_touch() {
    let lines = run(env!("CARGO_BIN_EXE_tegg-bench"), &["--n", "10", "--driver", "inproc", "--seconds", "0.5"]);
    assert_eq!(lines.len(), 10, "{lines:#?}");
    for flavour in ["singleton", "context", "handwired", "handwired-traced", "handwired-context"] {
        for touch in ["false", "true"] {
            let line = lines
                .iter()
                .find(|l| field(l, "flavour") == Some(flavour) && field(l, "touch") == Some(touch))
                .unwrap_or_else(|| panic!("no line for {flavour} touch={touch}: {lines:#?}"));
            assert_eq!(field(line, "n"), Some("10"));
            assert_eq!(field(line, "driver"), Some("inproc"));
            for key in ["rps", "p50_us", "p99_us", "allocs_per_req", "bytes_per_req"] {
                let value: f64 =
                    field(line, key).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{key} in {line}"));
                assert!(value > 0.0, "{key} in {line}");
            }
            // Every request sent, warm-up included: more than the measured ones, which are
            // rps times the measured time (at least the 0.5 s asked for).
            let served: u64 = field(line, "served").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"));
            let rps: f64 = field(line, "rps").and_then(|v| v.parse().ok()).unwrap();
            assert!(served as f64 > rps * 0.5, "served in {line}");
        }
    }
}

#[test]
fn tegg_bench_names_the_n_a_build_serves() {
    let out = Command::new(env!("CARGO_BIN_EXE_tegg-bench")).args(["--n", "7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--n 7: this build serves N in [1, 10, 100]"));
}

#[test]
fn context_overhead_prints_penalties_and_writes_its_chart() {
    let dir = std::env::temp_dir().join(format!("context-overhead-smoke-{}", std::process::id()));
    let lines = run(
        env!("CARGO_BIN_EXE_context-overhead"),
        &["--depths", "1,10", "--seconds", "0.5", "--results", dir.to_str().unwrap()],
    );
    let penalties: Vec<_> = lines.iter().filter(|l| field(l, "penalty_pct").is_some()).collect();
    // Two depths in two shapes, and the two loops.
    assert_eq!(penalties.len(), 6, "{lines:#?}");
    let svg = std::fs::read_to_string(dir.join("penalty.svg")).unwrap();
    assert!(svg.contains("koa + ALS"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn soak_counts_every_object_and_finds_no_mixup() {
    let lines = run(env!("CARGO_BIN_EXE_soak"), &["--requests", "3000", "--concurrency", "16"]);
    assert_eq!(lines.iter().filter(|l| field(l, "progress").is_some()).count(), 10, "{lines:#?}");
    let summary = lines.last().expect("a summary");
    for (key, value) in [("requests", "3000"), ("mixups", "0"), ("unexpected", "0"), ("healthy", "true")] {
        assert_eq!(field(summary, key), Some(value), "{key} in {summary}");
    }
    let count = |key| field(summary, key).and_then(|v| v.parse::<u64>().ok()).unwrap();
    assert!(count("created") > 5000, "{summary}");
    assert_eq!(count("created"), count("destroyed"));
    assert_eq!(count("destroyed"), count("destroy_hooks"));
    assert_eq!((count("panics"), count("failed_completions"), count("disconnects")), (16 * 2, 16 * 2, 16 * 2));
    // Each client's 188 requests: 2 hang up mid-stream, 12 are streamed to their end.
    assert_eq!((count("stream_hangups"), count("streamed")), (16 * 2, 16 * 12));
}
