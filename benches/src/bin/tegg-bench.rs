//! tegg's benchmark, replicated: requests/s of `GET /{flavour}/hello{N}[?touch=true]` for a
//! project of 10000 services (release builds; 100 in debug builds, see `tegu_codegen::tegg`).
//!
//! ```sh
//! cargo run --release -p benches --bin tegg-bench -- [--flavour singleton|context|handwired|
//!     handwired-traced|handwired-context]
//!     [--n N] [--touch | --no-touch] [--driver inproc|http] [--seconds S] [--threads T]
//!     [--concurrency K] [--results DIR]
//! ```
//!
//! Each measurement prints one JSON line: `flavour, n, touch, driver, rps, p50_us, p99_us,
//! allocs_per_req, bytes_per_req` (allocation figures from the inproc driver only), then
//! `threads` and, inproc, `served`: every request the measurement sent, warm-up included (what
//! `benches/scripts/per-request.sh` divides a profile's counts by). A flag left out means every value; with no flags at all it runs the whole table,
//! the start-up figures, and writes `benches/results/` (JSON lines and SVG charts).
//!
//! - `inproc`: K tasks (default 25) send requests through the axum `Router` (`ready`, then
//!   `call`; no sockets) for S seconds (default 3) on a runtime of T worker threads (default:
//!   every core). Allocations are counted over a sequential run of the same requests first.
//! - `http`: the server on loopback, `wrk -t1 -c25 -d{S}s --latency` (default 10 s) after a
//!   one-second warm-up; wrk must be installed (`bash benches/scripts/wrk.sh`), else the driver
//!   is skipped.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use benches::args::{choice, value};
use benches::chart::{Chart, Series};
use benches::stats::{Value, field, json_line, percentile_us};
use tegu_core::App;
use tegu_test_support::alloc::{Counting, measure};
use tower::{Service, ServiceExt};

#[global_allocator]
static ALLOC: Counting = Counting;

const FLAVOURS: [&str; 5] = ["singleton", "context", "handwired", "handwired-traced", "handwired-context"];
const DRIVERS: [&str; 2] = ["inproc", "http"];

struct Args {
    flavours: Vec<&'static str>,
    ns: Vec<usize>,
    touches: Vec<bool>,
    drivers: Vec<&'static str>,
    seconds: Option<f64>,
    threads: usize,
    concurrency: usize,
    results: Option<PathBuf>,
    whole_table: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        flavours: FLAVOURS.to_vec(),
        ns: tegg_app::NS.to_vec(),
        touches: vec![false, true],
        drivers: DRIVERS.to_vec(),
        seconds: None,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        concurrency: 25,
        results: None,
        whole_table: std::env::args().len() == 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--flavour" => args.flavours = vec![choice(&mut it, "--flavour", &FLAVOURS)?],
            "--n" => {
                let n: usize = value(&mut it, "--n")?;
                if !tegg_app::NS.contains(&n) {
                    return Err(format!(
                        "--n {n}: this build serves N in {:?} ({} services; release builds have 10000, or set TEGG_SERVICES)",
                        tegg_app::NS,
                        tegg_app::SERVICES
                    ));
                }
                args.ns = vec![n];
            }
            "--touch" => args.touches = vec![true],
            "--no-touch" => args.touches = vec![false],
            "--driver" => args.drivers = vec![choice(&mut it, "--driver", &DRIVERS)?],
            "--seconds" => args.seconds = Some(value(&mut it, "--seconds")?),
            "--threads" => args.threads = value(&mut it, "--threads")?,
            "--concurrency" => args.concurrency = value(&mut it, "--concurrency")?,
            "--results" => args.results = Some(value(&mut it, "--results")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.whole_table {
        args.results = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"));
    }
    Ok(args)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let [_, flag, file] = argv.as_slice()
        && flag == "--scaling-chart"
    {
        return match scaling_chart(std::path::Path::new(file)) {
            Ok(svg) => {
                eprintln!("chart written to {}", svg.display());
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("{file}: {err}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!(
                "{err}\nusage: tegg-bench [--flavour F] [--n N] [--touch|--no-touch] [--driver inproc|http] [--seconds S] [--threads T] [--concurrency K] [--results DIR]"
            );
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut lines = Vec::new();
    let mut emit = |line: String| {
        println!("{line}");
        lines.push(line);
    };
    let started = Instant::now();
    // The container flavours' crates are named nowhere else: `link` has them linked, and with
    // them their protos' registrations.
    let builder = App::builder().link::<tegg_singleton::SingletonHello1>().link::<tegg_context::ContextHello1>();
    let app = runtime.block_on(builder.build()).expect("the generated project builds");
    if args.whole_table {
        emit(json_line(&[
            ("metric", Value::Str("app_build_ms".into())),
            ("what", Value::Str("the whole generated project, through inventory".into())),
            ("protos", Value::Int(app.proto_count() as u64)),
            ("ms", Value::Num(started.elapsed().as_secs_f64() * 1e3)),
        ]));
        for line in runtime.block_on(startup_figures()) {
            emit(line);
        }
    }
    let router = tegu_http::router(&app)
        .merge(tegg_handwired::handwired_router())
        .merge(tegg_handwired::handwired_traced_router())
        .merge(tegg_handwired_context::handwired_context_router());
    let wrk = args.drivers.contains(&"http") && ensure_wrk();
    for &driver in &args.drivers {
        if driver == "http" && !wrk {
            eprintln!("skipping the http driver: wrk is not available");
            continue;
        }
        for &flavour in &args.flavours {
            for &n in &args.ns {
                for &touch in &args.touches {
                    let path = format!("/{flavour}/hello{n}{}", if touch { "?touch=true" } else { "" });
                    let m = match driver {
                        "inproc" => {
                            runtime.block_on(inproc(&router, &path, args.seconds.unwrap_or(3.0), args.concurrency))
                        }
                        _ => http(&runtime, &router, &path, args.seconds.unwrap_or(10.0)),
                    };
                    emit(json_line(&[
                        ("flavour", Value::Str(flavour.into())),
                        ("n", Value::Int(n as u64)),
                        ("touch", Value::Bool(touch)),
                        ("driver", Value::Str(driver.into())),
                        ("rps", Value::Num(m.rps)),
                        ("p50_us", Value::Num(m.p50_us)),
                        ("p99_us", Value::Num(m.p99_us)),
                        ("allocs_per_req", m.allocs.map_or(Value::Null, Value::Num)),
                        ("bytes_per_req", m.bytes.map_or(Value::Null, Value::Num)),
                        ("threads", Value::Int(args.threads as u64)),
                        ("served", m.served.map_or(Value::Null, Value::Int)),
                    ]));
                }
            }
        }
    }
    if args.whole_table || args.drivers.contains(&"http") {
        emit(json_line(&[
            ("metric", Value::Str("peak_rss_kb".into())),
            ("kb", peak_rss_kb().map_or(Value::Null, Value::Int)),
        ]));
    }
    if let Some(dir) = &args.results {
        if let Err(err) = write_results(dir, &lines) {
            eprintln!("writing {}: {err}", dir.display());
            return ExitCode::FAILURE;
        }
        eprintln!("results and charts written to {}", dir.display());
    }
    runtime.block_on(app.shutdown()).expect("the App shuts down");
    ExitCode::SUCCESS
}

struct Measurement {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    allocs: Option<f64>,
    bytes: Option<f64>,
    /// Every request sent, warm-up and allocation run included (inproc only).
    served: Option<u64>,
}

fn request(path: &str) -> axum::http::Request<Body> {
    axum::http::Request::get(path).body(Body::empty()).expect("a valid request")
}

/// One request through the router, its body read to the end; panics on anything but 200.
async fn one(router: &mut Router, path: &str) {
    let ready = ServiceExt::<axum::http::Request<Body>>::ready(router).await.expect("infallible");
    let response = ready.call(request(path)).await.expect("infallible");
    assert_eq!(response.status(), 200, "GET {path}");
    let body = axum::body::to_bytes(response.into_body(), 1024).await.expect("a small body");
    std::hint::black_box(body);
}

async fn inproc(router: &Router, path: &str, seconds: f64, concurrency: usize) -> Measurement {
    // Warm-up, then allocations over a sequential run (at most 200 requests or half a second).
    let mut warm = router.clone();
    let warm_until = Instant::now() + Duration::from_millis(300);
    let mut warmed = 0u64;
    while Instant::now() < warm_until {
        one(&mut warm, path).await;
        warmed += 1;
    }
    let (allocs, bytes, requests) = measure(async {
        let until = Instant::now() + Duration::from_millis(500);
        let mut requests = 0u64;
        while requests < 200 && (requests == 0 || Instant::now() < until) {
            one(&mut warm, path).await;
            requests += 1;
        }
        requests
    })
    .await;

    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let mut router = router.clone();
            let path = path.to_owned();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(1 << 16);
                while Instant::now() < deadline {
                    let t = Instant::now();
                    one(&mut router, &path).await;
                    latencies.push(t.elapsed().as_nanos() as u64);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a request task"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Measurement {
        rps: latencies.len() as f64 / elapsed,
        p50_us: percentile_us(&latencies, 50.0),
        p99_us: percentile_us(&latencies, 99.0),
        allocs: Some(allocs as f64 / requests as f64),
        bytes: Some(bytes as f64 / requests as f64),
        served: Some(warmed + requests + latencies.len() as u64),
    }
}

/// Whether `wrk` runs. The benchmark installs nothing: `bash benches/scripts/wrk.sh` does.
fn ensure_wrk() -> bool {
    let runs = Command::new("wrk").arg("--version").output().is_ok();
    if !runs {
        eprintln!("wrk not found: `bash benches/scripts/wrk.sh` installs it (apt-get)");
    }
    runs
}

fn http(runtime: &tokio::runtime::Runtime, router: &Router, path: &str, seconds: f64) -> Measurement {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
    let addr: SocketAddr = listener.local_addr().expect("a local address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // `App::shutdown` is for the end of the program: the server is stopped with axum's own
    // graceful shutdown and the App kept for the next measurement.
    let server = runtime.spawn(
        axum::serve(listener, router.clone())
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let url = format!("http://{addr}{path}");
    let _ = Command::new("wrk").args(["-t1", "-c25", "-d1s", &url]).output();
    let out = Command::new("wrk")
        .args(["-t1", "-c25", &format!("-d{}s", seconds.ceil().max(1.0)), "--latency", &url])
        .output()
        .expect("wrk runs");
    let _ = stop.send(());
    let _ = runtime.block_on(server);
    let text = String::from_utf8_lossy(&out.stdout);
    parse_wrk(&text).unwrap_or_else(|| panic!("unexpected wrk output:\n{text}"))
}

/// Requests/s and the 50th and 99th latency percentiles from `wrk --latency` output.
fn parse_wrk(text: &str) -> Option<Measurement> {
    let rps = text.lines().find_map(|l| l.trim().strip_prefix("Requests/sec:"))?.trim().parse().ok()?;
    let pct = |p: &str| {
        text.lines().find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(p)).then(|| words.next().and_then(duration_us)).flatten()
        })
    };
    if text.contains("Non-2xx") {
        eprintln!("wrk saw non-2xx responses:\n{text}");
    }
    Some(Measurement { rps, p50_us: pct("50%")?, p99_us: pct("99%")?, allocs: None, bytes: None, served: None })
}

/// `"1.23ms"` -> 1230.0 (microseconds).
fn duration_us(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let num: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => num,
        "ms" => num * 1e3,
        "s" => num * 1e6,
        "m" => num * 60e6,
        _ => return None,
    })
}

/// `build()` of an App of 10000 singletons and of 10000 context protos, registered by hand.
async fn startup_figures() -> Vec<String> {
    struct Unit;
    let mut lines = Vec::new();
    for scope in [tegu_core::registry::Lifetime::Singleton, tegu_core::registry::Lifetime::Context] {
        let builder = (0..10_000).fold(App::builder().without_inventory(), |b, i| {
            b.register(tegu_core::ProtoDef::new::<Unit>(scope, |_| Ok(Unit)).name(format!("unit{i}")))
        });
        let started = Instant::now();
        let app = builder.build().await.expect("10000 units build");
        let ms = started.elapsed().as_secs_f64() * 1e3;
        lines.push(json_line(&[
            ("metric", Value::Str("app_build_ms".into())),
            ("what", Value::Str(format!("10000 {scope:?} protos, registered by hand").to_lowercase())),
            ("protos", Value::Int(app.proto_count() as u64)),
            ("ms", Value::Num(ms)),
        ]));
    }
    lines
}

/// The peak resident set of this process (the server and the driver), from `/proc`.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// tegg 3's published figures with touching (another machine: 6-core laptop, 4 workers).
const TEGG3_TOUCH: [(f64, f64); 5] =
    [(1.0, 18_200.0), (10.0, 18_600.0), (100.0, 16_200.0), (1000.0, 4_800.0), (10000.0, 471.0)];

fn write_results(dir: &std::path::Path, lines: &[String]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("tegg-bench.jsonl"), lines.join("\n") + "\n")?;
    for touch in [false, true] {
        let mut series = Vec::new();
        for driver in DRIVERS {
            for flavour in FLAVOURS {
                let points: Vec<(f64, f64)> = lines
                    .iter()
                    .filter(|l| {
                        field(l, "flavour") == Some(flavour)
                            && field(l, "driver") == Some(driver)
                            && field(l, "touch") == Some(if touch { "true" } else { "false" })
                    })
                    .filter_map(|l| Some((field(l, "n")?.parse().ok()?, field(l, "rps")?.parse().ok()?)))
                    .collect();
                if !points.is_empty() {
                    series.push(Series { label: format!("{flavour}, {driver}"), points, dashed: false });
                }
            }
        }
        if touch {
            series.push(Series { label: "tegg 3 (published)".into(), points: TEGG3_TOUCH.to_vec(), dashed: true });
        } else {
            series.push(Series {
                label: "tegg 3 (published, ~18k)".into(),
                points: vec![(1.0, 18_000.0), (10000.0, 18_000.0)],
                dashed: true,
            });
        }
        let chart = Chart {
            title: format!("GET /hello{{N}}{}: requests/s", if touch { "?touch=true" } else { "" }),
            x_label: "N (services the controller injects)".into(),
            y_label: "requests/s (log)".into(),
            log_x: true,
            log_y: true,
            series,
        };
        std::fs::write(dir.join(format!("rps-{}.svg", if touch { "touch" } else { "no-touch" })), chart.svg())?;
    }
    Ok(())
}

/// From the lines of `benches/scripts/scaling.sh`: requests/s against worker threads, one line per
/// flavour and touch at the largest N measured; the SVG next to `file`.
fn scaling_chart(file: &std::path::Path) -> std::io::Result<PathBuf> {
    let text = std::fs::read_to_string(file)?;
    let lines: Vec<&str> = text.lines().filter(|l| field(l, "driver") == Some("inproc")).collect();
    let n = lines.iter().filter_map(|l| field(l, "n")?.parse::<usize>().ok()).max().unwrap_or(1).to_string();
    let mut series = Vec::new();
    for flavour in FLAVOURS {
        for touch in ["false", "true"] {
            let points: Vec<(f64, f64)> = lines
                .iter()
                .filter(|l| {
                    field(l, "flavour") == Some(flavour)
                        && field(l, "touch") == Some(touch)
                        && field(l, "n") == Some(&n)
                })
                .filter_map(|l| Some((field(l, "threads")?.parse().ok()?, field(l, "rps")?.parse().ok()?)))
                .collect();
            if !points.is_empty() {
                let label = format!("{flavour}{}", if touch == "true" { ", touch" } else { "" });
                series.push(Series { label, points, dashed: touch == "true" });
            }
        }
    }
    let chart = Chart {
        title: format!("GET /hello{n} in-process: requests/s by worker threads"),
        x_label: "worker threads".into(),
        y_label: "requests/s (log)".into(),
        log_x: false,
        log_y: true,
        series,
    };
    let svg = file.with_extension("svg");
    std::fs::write(&svg, chart.svg())?;
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_is_parsed() {
        let text = "Running 10s test @ http://127.0.0.1:1/x\n  1 threads and 25 connections\n  Latency Distribution\n     50%  120.00us\n     75%  200.00us\n     90%    1.10ms\n     99%    2.50ms\n  100000 requests in 10.00s, 1.00MB read\nRequests/sec:  10000.50\nTransfer/sec:    100.00KB\n";
        let m = parse_wrk(text).unwrap();
        assert_eq!((m.rps, m.p50_us, m.p99_us), (10000.5, 120.0, 2500.0));
        assert_eq!(duration_us("1.5s"), Some(1.5e6));
        assert_eq!(duration_us("12"), None);
    }
}
