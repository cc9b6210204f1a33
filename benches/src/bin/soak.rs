//! The end of a request, soaked: N requests at concurrency C over real keep-alive connections,
//! each with its own `x-request-id`, mixed with clients that hang up mid-request, handlers that
//! panic and completion hooks that fail. Counts mix-ups (a request that saw another's context),
//! context objects created, dropped and destroy hooks run, and samples RSS at each 10%.
//!
//! ```sh
//! cargo run --release -p benches --bin soak -- [--requests N] [--concurrency C] [--threads T]
//! ```
//!
//! Defaults: 1,000,000 requests, concurrency 128, every core. Prints one JSON line per 10% of
//! the requests (`progress`, `requests`, `rss_kb`), then a summary line; exits with 1 if a
//! request was mixed up, a count disagrees, or a status was not the expected one. Of every 100
//! requests: 1 hangs up mid-request, 1 panics in its handler, 1 fails its completion hook, 1
//! hangs up mid-stream (after the first frame of an endless streamed body), 6 get a streamed
//! body of 4 frames, each frame produced inside the request's scope from its context objects,
//! the rest succeed (each touching two context objects, one with a completion hook). `healthy`
//! also needs every successful request completed (a hung-up one may complete too, if its handler
//! finished before the server saw the client go); `rss_flat` says whether RSS stayed within 10% of
//! its first sample (reported only: a short run still grows while it warms up).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use benches::args::value;
use benches::stats::{Value, json_line};
use tegu_core::{App, ContextRef, context_proto, singleton_proto};
use tegu_http::{RequestHead, Server, http_controller, http_routes};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The message of the handler's deliberate panics, which the panic hook keeps quiet.
const EXPECTED_PANIC: &str = "the soak's handler gave up";

/// Life counts of the soak's context objects.
static CREATED: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static DESTROY_HOOKS: AtomicU64 = AtomicU64::new(0);
static COMPLETED: AtomicU64 = AtomicU64::new(0);

/// A field that counts its object's creation and drop.
#[derive(Debug)]
struct Life;

impl Default for Life {
    fn default() -> Self {
        CREATED.fetch_add(1, Ordering::Relaxed);
        Life
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per request: the request's id, as the head gives it.
#[context_proto(destroy = finish)]
#[derive(Debug)]
pub struct Tracer {
    #[inject]
    head: Arc<RequestHead>,
    _life: Life,
}

impl Tracer {
    async fn finish(&self) {
        DESTROY_HOOKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per request: a unit of work whose commit fails when the request asks.
#[context_proto(complete = commit, destroy = close)]
#[derive(Debug)]
pub struct Ledger {
    #[inject]
    head: Arc<RequestHead>,
    _life: Life,
}

impl Ledger {
    async fn commit(&self) -> Result<(), &'static str> {
        if self.head.headers().contains_key("x-fail") {
            return Err("commit refused");
        }
        COMPLETED.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    async fn close(&self) {
        DESTROY_HOOKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A singleton reaching the request's objects through proxies.
#[singleton_proto]
#[derive(Debug)]
pub struct Service {
    #[inject]
    tracer: ContextRef<Tracer>,
    #[inject]
    ledger: ContextRef<Ledger>,
}

impl Service {
    /// The id this request's context objects see; they must agree.
    fn whoami(&self) -> String {
        let (tracer, ledger) = (self.tracer.get(), self.ledger.get());
        let (a, b) = (tracer.head.id().to_string(), ledger.head.id().to_string());
        if a == b { a } else { format!("{a}!={b}") }
    }
}

/// The routes the clients call.
#[http_controller(path = "/soak")]
#[derive(Debug)]
pub struct SoakController {
    #[inject]
    service: Arc<Service>,
}

/// The frames of `/soak/stream`.
const STREAM_FRAMES: usize = 4;

impl SoakController {
    /// A streamed body of `frames` frames (`None`: endless), each the id the request's objects
    /// see. The handler touches them first: the ledger has a completion hook, which a body,
    /// produced after the completion phase, could not create.
    fn streamed(&self, frames: Option<usize>) -> Body {
        self.service.whoami();
        let service = Arc::clone(&self.service);
        let frames = futures_util::stream::unfold(0, move |i| {
            let service = Arc::clone(&service);
            async move {
                if frames.is_some_and(|n| i == n) {
                    return None;
                }
                if frames.is_none() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                Some((Ok::<_, std::convert::Infallible>(format!("{}\n", service.whoami())), i + 1))
            }
        });
        Body::from_stream(frames)
    }
}

#[http_routes]
impl SoakController {
    #[get("/ok")]
    async fn ok(&self) -> String {
        tokio::task::yield_now().await;
        self.service.whoami()
    }

    #[get("/panic")]
    async fn panic(&self) -> String {
        self.service.whoami();
        panic!("{EXPECTED_PANIC}")
    }

    /// A body of 4 frames, each one produced by the server after the handler returned, inside
    /// the request's scope: the id its context objects see.
    #[get("/stream")]
    async fn stream(&self) -> Body {
        self.streamed(Some(STREAM_FRAMES))
    }

    /// A body that never ends, a frame a millisecond: its client hangs up after the first.
    #[get("/endless")]
    async fn endless(&self) -> Body {
        self.streamed(None)
    }

    /// Slow enough for its client to hang up while it runs.
    #[get("/slow")]
    async fn slow(&self) -> String {
        self.service.whoami();
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.service.whoami()
    }
}

struct Args {
    requests: u64,
    concurrency: u64,
    threads: usize,
}

impl Args {
    /// How many requests client `task` sends.
    fn share(&self, task: u64) -> u64 {
        self.requests / self.concurrency + u64::from(task < self.requests % self.concurrency)
    }
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        requests: 1_000_000,
        concurrency: 128,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--requests" => args.requests = value(&mut it, "--requests")?,
            "--concurrency" => args.concurrency = value(&mut it, "--concurrency")?,
            "--threads" => args.threads = value(&mut it, "--threads")?,
            other => return Err(format!("unknown flag {other}; see the file's docs")),
        }
    }
    if args.requests == 0 || args.concurrency == 0 {
        return Err("--requests and --concurrency are at least 1".into());
    }
    Ok(args)
}

/// What the clients saw.
#[derive(Default)]
struct Tally {
    done: AtomicU64,
    ok: AtomicU64,
    mixups: AtomicU64,
    panics: AtomicU64,
    failed_completions: AtomicU64,
    disconnects: AtomicU64,
    /// Streamed responses whose every frame carried their own id.
    streamed: AtomicU64,
    /// Clients that hung up after the first frame of an endless stream.
    stream_hangups: AtomicU64,
    unexpected: AtomicU64,
}

/// One keep-alive connection speaking just enough HTTP/1.1.
struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    async fn open(addr: std::net::SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream: BufReader::new(stream) })
    }

    async fn get(&mut self, path: &str, id: &str, extra: &str) -> std::io::Result<(u16, String)> {
        let request = format!("GET {path} HTTP/1.1\r\nhost: soak\r\nx-request-id: {id}\r\n{extra}\r\n");
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or(std::io::ErrorKind::InvalidData)?;
        let mut length = 0;
        let mut chunked = false;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().map_err(|_| std::io::ErrorKind::InvalidData)?;
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        if chunked {
            return Ok((status, self.chunks().await?.concat()));
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// The chunks of a chunked body, to its last (empty) one.
    async fn chunks(&mut self) -> std::io::Result<Vec<String>> {
        let mut chunks = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let size = usize::from_str_radix(line.trim_end(), 16).map_err(|_| std::io::ErrorKind::InvalidData)?;
            let mut chunk = vec![0; size + 2]; // and its CRLF
            self.stream.read_exact(&mut chunk).await?;
            if size == 0 {
                return Ok(chunks);
            }
            chunk.truncate(size);
            chunks.push(String::from_utf8_lossy(&chunk).into_owned());
        }
    }
}

/// Sends `/slow` on a connection of its own and hangs up while the handler runs.
async fn hang_up(addr: std::net::SocketAddr, id: &str) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(format!("GET /soak/slow HTTP/1.1\r\nhost: soak\r\nx-request-id: {id}\r\n\r\n").as_bytes()).await?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(())
}

/// Asks for an endless stream on a connection of its own and hangs up after its first frame.
async fn hang_up_mid_stream(addr: std::net::SocketAddr, id: &str) -> std::io::Result<()> {
    let mut conn = Conn::open(addr).await?;
    let request = format!("GET /soak/endless HTTP/1.1\r\nhost: soak\r\nx-request-id: {id}\r\n\r\n");
    conn.stream.get_mut().write_all(request.as_bytes()).await?;
    let mut line = String::new();
    while !line.starts_with(id) {
        line.clear();
        if conn.stream.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(()) // dropped here, mid-stream
}

async fn client(addr: std::net::SocketAddr, task: u64, share: u64, tally: Arc<Tally>) {
    let mut conn = Conn::open(addr).await.expect("connect");
    for n in 0..share {
        let id = format!("c{task}-{n}");
        let outcome = match n % 100 {
            0 => hang_up(addr, &id).await.map(|()| {
                tally.disconnects.fetch_add(1, Ordering::Relaxed);
            }),
            1 => conn.get("/soak/panic", &id, "").await.map(|(status, _)| {
                let counter = if status == 500 { &tally.panics } else { &tally.unexpected };
                counter.fetch_add(1, Ordering::Relaxed);
            }),
            2 => conn.get("/soak/ok", &id, "x-fail: yes\r\n").await.map(|(status, _)| {
                let counter = if status == 500 { &tally.failed_completions } else { &tally.unexpected };
                counter.fetch_add(1, Ordering::Relaxed);
            }),
            3 => hang_up_mid_stream(addr, &id).await.map(|()| {
                tally.stream_hangups.fetch_add(1, Ordering::Relaxed);
            }),
            4..=9 => conn.get("/soak/stream", &id, "").await.map(|(status, body)| {
                let mine = body.lines().count() == STREAM_FRAMES && body.lines().all(|frame| frame == id);
                let counter = match (status, mine) {
                    (200, true) => &tally.streamed,
                    (200, false) => &tally.mixups,
                    _ => &tally.unexpected,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }),
            _ => conn.get("/soak/ok", &id, "").await.map(|(status, body)| {
                let counter = match (status, body == id) {
                    (200, true) => &tally.ok,
                    (200, false) => &tally.mixups,
                    _ => &tally.unexpected,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }),
        };
        if let Err(error) = outcome {
            eprintln!("request {id}: {error}; reconnecting");
            tally.unexpected.fetch_add(1, Ordering::Relaxed);
            conn = Conn::open(addr).await.expect("reconnect");
        }
        tally.done.fetch_add(1, Ordering::Relaxed);
    }
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    // One request in a hundred panics on purpose: print only the panics nobody expected.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str);
        if message != Some(EXPECTED_PANIC) {
            default_hook(info);
        }
    }));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build().expect("runtime");
    runtime.block_on(soak(args))
}

async fn soak(args: Args) -> ExitCode {
    let app = App::builder().build().await.expect("the soak's graph is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::new(app.clone(), tegu_http::router(&app))
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .run(listener),
    );

    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let clients: Vec<_> =
        (0..args.concurrency).map(|task| tokio::spawn(client(addr, task, args.share(task), tally.clone()))).collect();
    let mut rss = Vec::new();
    for tenth in 1..=10 {
        while tally.done.load(Ordering::Relaxed) < args.requests * tenth / 10 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let sample = rss_kb();
        rss.push(sample);
        println!(
            "{}",
            json_line(&[
                ("progress", Value::Int(tenth * 10)),
                ("requests", Value::Int(tally.done.load(Ordering::Relaxed))),
                ("rss_kb", Value::Int(sample)),
            ])
        );
    }
    for client in clients {
        client.await.expect("a client task");
    }
    let elapsed = started.elapsed();
    // Scopes end after their response: wait for the last ones, then shut down.
    let _ = stop.send(());
    let served = server.await.expect("the server task");

    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (created, dropped, hooks) = (load(&CREATED), load(&DROPPED), load(&DESTROY_HOOKS));
    let rss_growth_pct = (*rss.last().unwrap() as f64 / rss[0] as f64 - 1.0) * 100.0;
    // Request n of a client fails its completion when n % 100 == 2.
    let expected_failures = (0..args.concurrency).map(|task| (args.share(task) + 97) / 100).sum::<u64>();
    // Streams complete before their first frame, those whose client hangs up mid-stream too.
    let committed = load(&tally.ok) + load(&tally.streamed) + load(&tally.stream_hangups);
    let healthy = load(&tally.mixups) == 0
        && load(&tally.unexpected) == 0
        && created == dropped
        && dropped == hooks
        && load(&tally.failed_completions) == expected_failures
        // A client that hangs up may still see its handler finish (and complete) first.
        && (committed..=committed + load(&tally.disconnects)).contains(&load(&COMPLETED))
        && served.is_ok();
    // Reported, not part of `healthy`: a short run's RSS still grows while it warms up.
    let rss_flat = rss.iter().all(|&kb| (kb as f64) <= rss[0] as f64 * 1.1);
    println!(
        "{}",
        json_line(&[
            ("requests", Value::Int(load(&tally.done))),
            ("concurrency", Value::Int(args.concurrency)),
            ("threads", Value::Int(args.threads as u64)),
            ("seconds", Value::Num(elapsed.as_secs_f64())),
            ("rps", Value::Num(load(&tally.done) as f64 / elapsed.as_secs_f64())),
            ("ok", Value::Int(load(&tally.ok))),
            ("mixups", Value::Int(load(&tally.mixups))),
            ("panics", Value::Int(load(&tally.panics))),
            ("failed_completions", Value::Int(load(&tally.failed_completions))),
            ("disconnects", Value::Int(load(&tally.disconnects))),
            ("streamed", Value::Int(load(&tally.streamed))),
            ("stream_hangups", Value::Int(load(&tally.stream_hangups))),
            ("unexpected", Value::Int(load(&tally.unexpected))),
            ("created", Value::Int(created)),
            ("destroyed", Value::Int(dropped)),
            ("destroy_hooks", Value::Int(hooks)),
            ("completed", Value::Int(load(&COMPLETED))),
            ("rss_first_kb", Value::Int(rss[0])),
            ("rss_max_kb", Value::Int(rss.iter().copied().max().unwrap_or(0))),
            ("rss_last_kb", Value::Int(*rss.last().unwrap())),
            ("rss_growth_pct", Value::Num(rss_growth_pct)),
            ("rss_flat", Value::Bool(rss_flat)),
            ("healthy", Value::Bool(healthy)),
        ])
    );
    if healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
