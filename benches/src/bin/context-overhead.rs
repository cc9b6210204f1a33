//! The cost of context propagation, in the shapes the koa thread and the AsyncLocalStorage
//! measurements used (seeds 000, 002, 003): nested async middleware with and without a context
//! scope, and a loop of awaits inside and outside one.
//!
//! ```sh
//! cargo run --release -p benches --bin context-overhead -- [--seconds S (default 1, per variant)] [--depths 1,5,..] [--results DIR]
//! ```
//!
//! - `middleware`: a request goes through D tower layers, each awaiting the next (as a koa async
//!   middleware awaits `next()`), to a handler that yields to the runtime once (its I/O). `scope`
//!   runs the whole request in `App::run_in_context`, as `ContextLayer` does. Sequential
//!   requests on a current-thread runtime; rounds of the two alternate and the median of each is
//!   kept, so drift of the shared machine hits both.
//! - `axum_middleware`: the same with axum `from_fn` middleware through a `Router`, in-process:
//!   what a user of axum writes.
//! - `await_loop`: 1000 awaits of a trivial async fn; `yield_loop`: 1000 `yield_now()`s, each a
//!   new poll of the task and so a new entry into the scope's task-local.
//!
//! Every figure is a JSON line; penalty lines give `(1 - with/without) * 100`. With no flags it
//! writes `benches/results/context-overhead.jsonl` and `penalty.svg`; `--chart FILE.jsonl`
//! redraws the chart of earlier results.

use std::future::Future;
use std::hint::black_box;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use benches::args::value;
use benches::chart::{Chart, Series};
use benches::stats::{Value, field, json_line};
use tegu_core::App;
use tower::{Service, ServiceExt};

const DEPTHS: [usize; 8] = [1, 5, 10, 15, 20, 30, 50, 100];
/// Rounds of each variant; they alternate.
const ROUNDS: usize = 11;

/// koa with AsyncLocalStorage, async middleware (seed 000; Node 13, another machine): the
/// penalty in % computed from its requests/s with and without.
const KOA_ALS_PENALTY: [(f64, f64); 8] =
    [(1.0, 32.4), (5.0, 44.7), (10.0, 47.7), (15.0, 57.3), (20.0, 61.2), (30.0, 70.1), (50.0, 77.7), (100.0, 86.3)];

/// A middleware: awaits the next service, returns its answer.
#[derive(Clone)]
struct Pass<S>(S);

pin_project_lite::pin_project! {
    struct PassFuture<F> {
        #[pin]
        next: F,
    }
}

impl<F: Future> Future for PassFuture<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().next.poll(cx)
    }
}

impl<S: Service<u64>> Service<u64> for Pass<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = PassFuture<S::Future>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }
    fn call(&mut self, req: u64) -> Self::Future {
        PassFuture { next: self.0.call(black_box(req)) }
    }
}

/// The handler: yields once (its I/O), answers.
#[derive(Clone)]
struct Handler;

impl Service<u64> for Handler {
    type Response = u64;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<u64, std::convert::Infallible>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: u64) -> Self::Future {
        Box::pin(async move {
            tokio::task::yield_now().await;
            Ok(req + 1)
        })
    }
}

/// `Pass(Pass(...(Handler)))`, one `x` per layer.
macro_rules! nest {
    () => { Handler };
    (x $($rest:tt)*) => { Pass(nest!($($rest)*)) };
}

/// Requests/s through `svc` for `time`, with or without a scope.
async fn requests<S>(svc: &mut S, app: &App, scope: bool, time: Duration) -> f64
where
    S: Service<u64, Response = u64, Error = std::convert::Infallible>,
{
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < time {
        for _ in 0..64 {
            let fut = svc.ready().await.expect("infallible").call(n);
            let out = if scope { app.run_in_context(fut).await } else { fut.await };
            black_box(out.expect("infallible"));
            n += 1;
        }
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Alternating rounds of `without` and `with`; the median of each.
async fn alternate<F, Fut>(mut run: F) -> (f64, f64)
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = f64>,
{
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        without.push(run(false).await);
        with.push(run(true).await);
    }
    (median(without), median(with))
}

async fn middleware(app: &App, depth: usize, round: Duration) -> (f64, f64) {
    macro_rules! at_depth {
        ($($d:literal => [$($x:tt)*]),*) => {
            match depth {
                $($d => {
                    let svc = nest!($($x)*);
                    alternate(|scope| {
                        let mut svc = svc.clone();
                        async move { requests(&mut svc, app, scope, round).await }
                    }).await
                })*
                other => panic!("depth {other} is not one of {DEPTHS:?}"),
            }
        };
    }
    at_depth!(
        1 => [x],
        5 => [x x x x x],
        10 => [x x x x x x x x x x],
        15 => [x x x x x x x x x x x x x x x],
        20 => [x x x x x x x x x x x x x x x x x x x x],
        30 => [x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x],
        50 => [x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x],
        100 => [x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x
                x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x]
    )
}

/// What axum users write: D `from_fn` middleware, each awaiting `next.run(req)`, around a
/// handler that yields once; requests through the `Router` in-process.
async fn axum_middleware(app: &App, depth: usize, round: Duration) -> (f64, f64) {
    use axum::extract::Request;
    use axum::middleware::{Next, from_fn};
    use axum::response::Response;
    async fn pass(req: Request, next: Next) -> Response {
        next.run(req).await
    }
    async fn handler() -> &'static str {
        tokio::task::yield_now().await;
        "ok"
    }
    let router =
        (0..depth).fold(axum::Router::new().route("/", axum::routing::get(handler)), |r, _| r.layer(from_fn(pass)));
    alternate(|scope| {
        let mut router = router.clone();
        async move {
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < round {
                for _ in 0..16 {
                    let req = axum::http::Request::get("/").body(axum::body::Body::empty()).expect("a request");
                    let ready = ServiceExt::<axum::http::Request<axum::body::Body>>::ready(&mut router).await;
                    let fut = ready.expect("infallible").call(req);
                    let res = if scope { app.run_in_context(fut).await } else { fut.await };
                    black_box(res.expect("infallible"));
                    n += 1;
                }
            }
            n as f64 / started.elapsed().as_secs_f64()
        }
    })
    .await
}

#[inline(never)]
async fn trivial(x: u64) -> u64 {
    black_box(x) + 1
}

/// Loops of 1000 awaits per second: of a trivial async fn, or of `yield_now`.
async fn loops(app: &App, yielding: bool, scope: bool, time: Duration) -> f64 {
    let body = async move {
        let started = Instant::now();
        let mut loops = 0u64;
        while started.elapsed() < time {
            let mut acc = loops;
            for _ in 0..1000 {
                if yielding {
                    tokio::task::yield_now().await;
                } else {
                    acc = trivial(acc).await;
                }
            }
            black_box(acc);
            loops += 1;
        }
        loops as f64 / started.elapsed().as_secs_f64()
    };
    if scope { app.run_in_context(body).await } else { body.await }
}

/// The penalty by depth of both middleware shapes, beside koa's.
fn penalty_chart(lines: &[String]) -> Chart {
    let points = |bench: &str| -> Vec<(f64, f64)> {
        lines
            .iter()
            .filter(|l| field(l, "bench") == Some(bench) && field(l, "penalty_pct").is_some())
            .filter_map(|l| Some((field(l, "depth")?.parse().ok()?, field(l, "penalty_pct")?.parse().ok()?)))
            .collect()
    };
    Chart {
        title: "Context propagation penalty per request, by middleware depth".into(),
        x_label: "nested async middleware".into(),
        y_label: "penalty (%)".into(),
        log_x: true,
        log_y: false,
        series: vec![
            Series { label: "di, bare tower layers".into(), points: points("middleware"), dashed: false },
            Series { label: "di, axum from_fn layers".into(), points: points("axum_middleware"), dashed: false },
            Series { label: "koa + ALS (seed 000)".into(), points: KOA_ALS_PENALTY.to_vec(), dashed: true },
        ],
    }
}

fn main() -> ExitCode {
    // `--chart FILE.jsonl`: the chart of earlier results, written next to them.
    let argv: Vec<String> = std::env::args().collect();
    if let [_, flag, file] = argv.as_slice()
        && flag == "--chart"
    {
        let path = std::path::Path::new(file);
        let written = std::fs::read_to_string(path).and_then(|text| {
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            std::fs::write(path.with_file_name("penalty.svg"), penalty_chart(&lines).svg())
        });
        return match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("{file}: {err}");
                ExitCode::FAILURE
            }
        };
    }
    let mut seconds = 1.0;
    let mut depths = DEPTHS.to_vec();
    let mut results = (std::env::args().len() == 1).then(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"));
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let parsed: Result<(), String> = match arg.as_str() {
            "--seconds" => value(&mut it, "--seconds").map(|v| seconds = v),
            "--depths" => value::<String>(&mut it, "--depths").and_then(|v| {
                depths = v
                    .split(',')
                    .map(|d| d.parse().map_err(|e| format!("--depths {d}: {e}")))
                    .collect::<Result<_, _>>()?;
                match depths.iter().find(|d| !DEPTHS.contains(d)) {
                    Some(d) => Err(format!("--depths {d}: expected some of {DEPTHS:?}")),
                    None => Ok(()),
                }
            }),
            "--results" => value(&mut it, "--results").map(|v| results = Some(v)),
            other => Err(format!("unknown argument {other}")),
        };
        if let Err(err) = parsed {
            eprintln!(
                "{err}\nusage: context-overhead [--seconds S (per variant)] [--depths 1,5,10,15,20,30,50,100] [--results DIR] | --chart FILE.jsonl"
            );
            return ExitCode::from(2);
        }
    }
    let round = Duration::from_secs_f64(seconds / ROUNDS as f64).max(Duration::from_millis(5));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let app = runtime.block_on(App::builder().without_inventory().build()).expect("an empty App");
    let mut lines = Vec::new();
    let mut emit = |line: String| {
        println!("{line}");
        lines.push(line);
    };
    let penalty = |without: f64, with: f64| (1.0 - with / without) * 100.0;
    for bench in ["middleware", "axum_middleware"] {
        for &depth in &depths {
            let (without, with) = match bench {
                "middleware" => runtime.block_on(middleware(&app, depth, round)),
                _ => runtime.block_on(axum_middleware(&app, depth, round)),
            };
            for (scope, rps) in [(false, without), (true, with)] {
                emit(json_line(&[
                    ("bench", Value::Str(bench.into())),
                    ("depth", Value::Int(depth as u64)),
                    ("scope", Value::Bool(scope)),
                    ("rps", Value::Num(rps)),
                ]));
            }
            emit(json_line(&[
                ("bench", Value::Str(bench.into())),
                ("depth", Value::Int(depth as u64)),
                ("penalty_pct", Value::Num(penalty(without, with))),
                ("scope_ns_per_req", Value::Num((1e9 / with - 1e9 / without).max(0.0))),
            ]));
        }
    }
    for (name, yielding) in [("await_loop", false), ("yield_loop", true)] {
        let (without, with) = runtime.block_on(alternate(|scope| loops(&app, yielding, scope, round)));
        for (scope, ops) in [(false, without), (true, with)] {
            emit(json_line(&[
                ("bench", Value::Str(name.into())),
                ("scope", Value::Bool(scope)),
                ("awaits_per_s", Value::Num(ops * 1000.0)),
            ]));
        }
        emit(json_line(&[("bench", Value::Str(name.into())), ("penalty_pct", Value::Num(penalty(without, with)))]));
    }
    if let Some(dir) = results {
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("context-overhead.jsonl"), lines.join("\n") + "\n"))
            .and_then(|()| std::fs::write(dir.join("penalty.svg"), penalty_chart(&lines).svg()));
        if let Err(err) = written {
            eprintln!("writing {}: {err}", dir.display());
            return ExitCode::FAILURE;
        }
        eprintln!("results and chart written to {}", dir.display());
    }
    ExitCode::SUCCESS
}
