//! What the workspace's tests share, in one place (a dev-dependency of tegu-core, tegu-http, the
//! examples and the integration tests; the benchmarks install its allocator):
//!
//! - [`http_client`]: a raw HTTP/1.1 client over a real socket, so that a test sees exactly
//!   what went over the wire, hang-ups mid-request included;
//! - [`alloc`]: the one counting global allocator, process-wide or per thread;
//! - [`child_env`]: running a test again in a child process with environment variables set;
//! - [`listen_backlog`]: the backlog the kernel gave a listening socket;
//! - [`open_files_at_least`]: room for as many sockets as a load test opens at once;
//! - [`Lines`]: a journal of lines, and waiting for it to say what a test expects (destroy
//!   hooks run after the response);
//! - [`capture_logs`]: what a piece of code logged through `tracing`;
//! - [`servers`]: real servers (PostgreSQL) on loopback with throwaway data;
//! - [`layout`]: a crate's sources read as text (imports, cycles, lines of code, functions),
//!   for the tests that check the code's layout;
//! - [`proxy`]: a fault-injecting TCP proxy between a client and such a server (a `COMMIT` cut
//!   before it is sent or after its answer, a server down or restarted).

pub mod alloc;
pub mod child_env;
pub mod http_client;
pub mod layout;
pub mod proxy;
pub mod servers;

/// Declares the test binary's `Journal`: a singleton proto holding [`Lines`] (and dereferencing
/// to it) whose destroy hook writes "singletons destroyed". A proto is registered per binary
/// (through `inventory`), so each binary declares its own; this writes it once. The binary
/// needs `tegu_core` (the macro names it by path).
///
/// # Examples
///
/// ```
/// tegu_test_support::journal_proto!();
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let journal = app.get_object::<Journal>()?;
/// journal.push("started");
/// app.shutdown().await?;
/// assert_eq!(journal.lines(), ["started", "singletons destroyed"]);
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! journal_proto {
    () => {
        /// Per App: what happened, in order.
        #[::tegu_core::singleton_proto(destroy = stop)]
        #[derive(Default)]
        pub struct Journal {
            log: $crate::Lines,
        }

        impl ::std::ops::Deref for Journal {
            type Target = $crate::Lines;
            fn deref(&self) -> &$crate::Lines {
                &self.log
            }
        }

        impl Journal {
            async fn stop(&self) {
                self.push("singletons destroyed");
            }
        }
    };
}

/// A journal of lines, in order, shared by its clones: what a test's hooks append and its
/// assertions read. A test's `Journal` singleton holds one (and derefs to it), so that each test
/// binary keeps only its proto.
#[derive(Clone, Debug, Default)]
pub struct Lines(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Lines {
    /// Appends `line`.
    pub fn push(&self, line: impl Into<String>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line.into());
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The lines so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Polls every 10 ms until `wanted` holds of the lines, at most 10 s (destroy hooks run
    /// after the response); returns them then.
    ///
    /// # Panics
    ///
    /// With the last lines, if `wanted` never held.
    pub async fn eventually(&self, wanted: impl Fn(&[String]) -> bool) -> Vec<String> {
        let mut last = Vec::new();
        let found = poll_until(async || {
            last = self.lines();
            wanted(&last).then(|| last.clone())
        })
        .await;
        found.unwrap_or_else(|| panic!("not logged within {EVENTUALLY:?}: {last:?}"))
    }
}

/// How long [`eventually`] and [`Lines::eventually`] wait.
pub const EVENTUALLY: std::time::Duration = std::time::Duration::from_secs(10);

/// Polls `probe` every 10 ms until it returns `Some`, at most [`EVENTUALLY`]: for what happens
/// after a response (destroy hooks, event handlers, a process exiting).
///
/// # Panics
///
/// If `probe` never returned `Some`.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut calls = 0;
/// let third = tegu_test_support::eventually(async || { calls += 1; (calls == 3).then_some(calls) }).await;
/// assert_eq!(third, 3);
/// # }
/// ```
pub async fn eventually<T>(probe: impl AsyncFnMut() -> Option<T>) -> T {
    poll_until(probe).await.unwrap_or_else(|| panic!("not within {EVENTUALLY:?}"))
}

async fn poll_until<T>(mut probe: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        if let Some(t) = probe().await {
            return Some(t);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Polls `done` every 20 ms until it holds, at most `within`: for what a test waits on across
/// processes and servers (a subscription, an outbox draining, an instance coming back), where
/// [`EVENTUALLY`] may be too short.
///
/// # Panics
///
/// If `done` still does not hold after `within`, naming `what`.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut polls = 0;
/// tegu_test_support::until("the third poll", std::time::Duration::from_secs(1), async || {
///     polls += 1;
///     polls == 3
/// })
/// .await;
/// assert_eq!(polls, 3);
/// # }
/// ```
pub async fn until(what: &str, within: std::time::Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "waited {within:?} for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The backlog of the socket listening on TCP `port`, as the kernel reports it (`ss -ltn`'s
/// Send-Q), and the most the kernel grants (`net.core.somaxconn`). Needs `ss` (iproute2).
///
/// # Panics
///
/// If `ss` cannot run or reports no listener on `port`.
pub fn listen_backlog(port: u16) -> (u32, u32) {
    let out = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .expect("`ss` (iproute2) reads a socket's backlog; install iproute2");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_else(|| panic!("no listener on port {port}: {text:?}"));
    let backlog = line.split_whitespace().nth(2).and_then(|q| q.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    let max = std::fs::read_to_string("/proc/sys/net/core/somaxconn").map_or(u32::MAX, |m| m.trim().parse().unwrap());
    (backlog, max)
}

/// Raises this process's limit of open files (its soft `RLIMIT_NOFILE`) to at least `files`,
/// up to the hard limit, so that a test can hold that many sockets at once; processes it starts
/// afterwards inherit the limit. Panics, naming the hard limit, where it is lower than `files`.
///
/// # Examples
///
/// ```
/// tegu_test_support::open_files_at_least(256);
/// ```
pub fn open_files_at_least(files: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_none_or(|current| current >= files) {
        return;
    }
    assert!(
        limit.maximum.is_none_or(|maximum| maximum >= files),
        "this test needs {files} open files; the hard limit is {:?} (raise it: `ulimit -Hn`)",
        limit.maximum
    );
    let raised = rustix::process::Rlimit { current: Some(files), maximum: limit.maximum };
    setrlimit(Resource::Nofile, raised).unwrap_or_else(|e| panic!("raising the open-files limit to {files}: {e}"));
}

/// Runs `f` on this thread with a `tracing` subscriber (every level, no colours) that writes
/// into a buffer; returns `f`'s output and what was logged. A current-thread runtime built
/// inside `f` logs here too, tasks included.
///
/// # Examples
///
/// ```
/// let ((), logs) = tegu_test_support::capture_logs(|| tracing::warn!(user = "ada", "hello"));
/// assert!(logs.contains("WARN") && logs.contains("hello user=\"ada\""), "{logs}");
/// ```
pub fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    let buffer = LogBuffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    (out, buffer.contents())
}

/// Log lines kept in memory: a clone is the writer of a `tracing_subscriber::fmt` layer
/// (`.with_writer(move || buffer.clone())`), [`contents`](Self::contents) what all clones wrote.
///
/// # Examples
///
/// ```
/// use tegu_test_support::LogBuffer;
///
/// let buffer = LogBuffer::default();
/// let writer = buffer.clone();
/// let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
/// tracing::subscriber::with_default(subscriber, || tracing::info!("hello"));
/// assert!(buffer.contents().contains("INFO") && buffer.contents().contains("hello"));
/// ```
#[derive(Clone, Default, Debug)]
pub struct LogBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl LogBuffer {
    /// What was written so far, as text.
    pub fn contents(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).into_owned()
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A path in the temporary directory for the SQLite database `name` of this test process, with
/// whatever a previous run left there removed ([`remove_sqlite`]).
///
/// # Examples
///
/// ```
/// let db = tegu_test_support::fresh_sqlite("doc");
/// assert!(!db.exists() && db.to_string_lossy().ends_with(".sqlite3"));
/// ```
pub fn fresh_sqlite(name: &str) -> std::path::PathBuf {
    let db = std::env::temp_dir().join(format!("di-test-{name}-{}.sqlite3", std::process::id()));
    remove_sqlite(&db);
    db
}

/// Removes a SQLite database: its file, and its `-wal` and `-shm` files. What is not there is
/// skipped.
///
/// # Examples
///
/// ```
/// let db = tegu_test_support::fresh_sqlite("removed");
/// std::fs::write(&db, b"")?;
/// tegu_test_support::remove_sqlite(&db);
/// assert!(!db.exists());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn remove_sqlite(db: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}
