//! Real servers for the tests that need them, from Debian's packages, on loopback with
//! throwaway data: a PostgreSQL cluster, a NATS server with JetStream.
//!
//! - `DI_TEST_POSTGRES_URL` (`DI_TEST_NATS_URL`) set: that server.
//! - Otherwise a cluster of this test process's own: `initdb` into a temporary folder (as the
//!   `postgres` user when the tests run as root, which PostgreSQL refuses to run as), a free
//!   port on 127.0.0.1, `fsync` off. A watchdog stops it and removes its folder when the test
//!   process is gone.
//!   NATS the same way ([`nats`]): `nats-server -js`, its store in a temporary folder.
//! - [`Own`]: a server of one test of its own, which the test restarts (with its data lost).
//! - When neither works, [`postgres`] ([`nats`]) says why. A test then skips with that reason printed,
//!   unless `DI_TEST_REQUIRE_SERVERS=1` (set by `.ci/run`): there it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The URL of a PostgreSQL server's `postgres` database, as its superuser `postgres` (trust
/// authentication on loopback), or why there is none. One server per test process.
///
/// # Panics
///
/// When there is none and `DI_TEST_REQUIRE_SERVERS=1`.
pub fn postgres() -> Result<&'static str, &'static str> {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| match std::env::var("DI_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Ok(url),
        _ => start_postgres(),
    });
    match server {
        Ok(url) => Ok(url),
        Err(why) if required() => panic!("DI_TEST_REQUIRE_SERVERS=1, but no PostgreSQL server: {why}"),
        Err(why) => Err(why),
    }
}

/// A new, empty database named `name` on the [`postgres`] server (dropped first if a previous
/// run left it), as a URL; or why there is none. With Debian's `dropdb` and `createdb`, one at
/// a time (PostgreSQL refuses to copy its template while another copy runs).
///
/// # Panics
///
/// When there is no server and `DI_TEST_REQUIRE_SERVERS=1`, or the database cannot be made.
pub fn postgres_database(name: &str) -> Result<String, &'static str> {
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let admin = postgres()?;
    let _one_at_a_time = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let bin = postgres_bin().unwrap_or_else(|| PathBuf::from("/usr/bin"));
    let maintenance = format!("--maintenance-db={admin}");
    for (program, args) in [("dropdb", vec!["--if-exists", &maintenance, name]), ("createdb", vec![&maintenance, name])]
    {
        let out = Command::new(bin.join(program)).args(&args).output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!("{program} {name}: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => panic!("{program} {name}: {e}"),
        }
    }
    let (server, _) = admin.rsplit_once('/').expect("a URL with a database");
    Ok(format!("{server}/{name}"))
}

/// The URL of a NATS server with JetStream, or why there is none. One server per test process.
///
/// # Panics
///
/// When there is none and `DI_TEST_REQUIRE_SERVERS=1`.
pub fn nats() -> Result<&'static str, &'static str> {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| match std::env::var("DI_TEST_NATS_URL") {
        Ok(url) if !url.is_empty() => Ok(url),
        _ => start_nats(),
    });
    match server {
        Ok(url) => Ok(url),
        Err(why) if required() => panic!("DI_TEST_REQUIRE_SERVERS=1, but no NATS server: {why}"),
        Err(why) => Err(why),
    }
}

fn start_nats() -> Result<String, String> {
    let server = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .ok_or("NATS is not installed (Debian's package `nats-server`)")?;
    let dir = std::env::temp_dir().join(format!("di-test-nats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let port = free_port()?;
    // The server, and a watchdog that stops it and removes its folder once this process is gone.
    let script = format!(
        "{server} -js -a 127.0.0.1 -p {port} -sd {dir}/store >{dir}/log 2>&1 & nats=$!; \
         while [ -d /proc/{parent} ] && kill -0 $nats 2>/dev/null; do sleep 1; done; \
         kill -TERM $nats 2>/dev/null; wait $nats; rm -rf {dir}",
        server = server.display(),
        dir = dir.display(),
        parent = std::process::id(),
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting nats-server: {e}"))?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if logged(&dir.join("log"), 0, NATS_READY) && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(format!("nats://127.0.0.1:{port}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    Err(format!("nats-server did not answer within 30 s; its log:\n{log}"))
}

/// What `nats-server` logs once it takes connections.
const NATS_READY: &str = "Server is ready";
/// What PostgreSQL logs once it takes connections.
const POSTGRES_READY: &str = "ready to accept connections";

/// Whether the log at `path`, from byte `from` on, has `line`.
fn logged(path: &Path, from: u64, line: &str) -> bool {
    let log = std::fs::read(path).unwrap_or_default();
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(log.len());
    String::from_utf8_lossy(&log[from..]).contains(line)
}

/// A free port on 127.0.0.1 that this process has not handed out before. The kernel may give
/// a port it just freed to the next `bind` to port 0; two servers of one test process (the
/// shared one and a test's [`Own`], started at once) then race for it, and the loser's clients
/// talk to the winner, which its test may stop.
fn free_port() -> Result<u16, String> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..100 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
    Err("finding a free port: 100 tries gave ports this process already uses".to_owned())
}

/// Whether the servers must be there (`DI_TEST_REQUIRE_SERVERS=1`: CI).
pub fn required() -> bool {
    std::env::var_os("DI_TEST_REQUIRE_SERVERS").is_some_and(|v| v == "1")
}

/// Prints why a test that needs a server does not run.
pub fn skip(test: &str, why: &str) {
    eprintln!("skipping {test}: {why}");
}

/// The newest PostgreSQL installed from Debian's packages: its `bin` folder.
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists() && bin.join("initdb").exists())
        .collect();
    versions.sort_by_key(|bin| bin.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0));
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program args...`, as the `postgres` user when this process is root.
fn as_owner(root: bool, program: &Path) -> Command {
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn start_postgres() -> Result<String, String> {
    let bin = postgres_bin().ok_or("PostgreSQL is not installed (Debian's package `postgresql`)")?;
    let root = is_root();
    let dir = std::env::temp_dir().join(format!("di-test-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    if root {
        let owned = Command::new("chown").args(["postgres:postgres"]).arg(&dir).status();
        if !owned.is_ok_and(|s| s.success()) {
            return Err(format!("cannot give {} to the `postgres` user", dir.display()));
        }
    }
    let data = dir.join("data");
    let init = as_owner(root, &bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("running initdb: {e}"))?;
    if !init.status.success() {
        return Err(format!("initdb failed: {}", String::from_utf8_lossy(&init.stderr).trim()));
    }
    let port = free_port()?;
    // The server, and a watchdog that stops it and removes its folder once this process is
    // gone (read through /proc: the `postgres` user may not signal a root process).
    let script = format!(
        "{postgres} -D {data} -p {port} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
         -c max_connections=200 >{dir}/log 2>&1 & pg=$!; \
         while [ -d /proc/{parent} ] && kill -0 $pg 2>/dev/null; do sleep 1; done; \
         kill -INT $pg 2>/dev/null; wait $pg; rm -rf {dir}",
        postgres = bin.join("postgres").display(),
        data = data.display(),
        dir = dir.display(),
        parent = std::process::id(),
    );
    as_owner(root, Path::new("sh"))
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting postgres: {e}"))?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
            .stdout(Stdio::null())
            .status();
        if ready.is_ok_and(|s| s.success()) && logged(&dir.join("log"), 0, POSTGRES_READY) {
            return Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    Err(format!("postgres did not answer within 30 s; its log:\n{log}"))
}

/// A server of one test of its own, which the test stops and starts again on the same port
/// (to restart it as an operator would, or with its data lost): [`Own::nats`] with its
/// JetStream store, [`Own::postgres`] with its cluster. A watchdog stops it once the test
/// process is gone; dropping it stops it and removes its folder.
#[derive(Debug)]
pub struct Own {
    kind: OwnKind,
    dir: PathBuf,
    port: u16,
    /// The server's process while it runs.
    child: Option<std::process::Child>,
}

#[derive(Debug)]
enum OwnKind {
    Nats(PathBuf),
    Postgres { bin: PathBuf, root: bool },
}

impl Own {
    /// A NATS server with JetStream of its own, started; or why there is none.
    ///
    /// # Panics
    ///
    /// When there is none and `DI_TEST_REQUIRE_SERVERS=1`.
    pub fn nats(name: &str) -> Result<Own, String> {
        let server =
            ["/usr/sbin/nats-server", "/usr/bin/nats-server"].into_iter().map(PathBuf::from).find(|p| p.exists());
        let made = match server {
            Some(server) => Own::new(OwnKind::Nats(server), name),
            None => Err("NATS is not installed (Debian's package `nats-server`)".to_owned()),
        };
        Self::or_skip(made)
    }

    /// A PostgreSQL cluster of its own, started; or why there is none.
    ///
    /// # Panics
    ///
    /// When there is none and `DI_TEST_REQUIRE_SERVERS=1`.
    pub fn postgres(name: &str) -> Result<Own, String> {
        let made = match postgres_bin() {
            Some(bin) => Own::new(OwnKind::Postgres { bin, root: is_root() }, name),
            None => Err("PostgreSQL is not installed (Debian's package `postgresql`)".to_owned()),
        };
        Self::or_skip(made)
    }

    fn or_skip(made: Result<Own, String>) -> Result<Own, String> {
        match made {
            Err(why) if required() => panic!("DI_TEST_REQUIRE_SERVERS=1, but no server: {why}"),
            made => made,
        }
    }

    fn new(kind: OwnKind, name: &str) -> Result<Own, String> {
        let what = match kind {
            OwnKind::Nats(_) => "nats",
            OwnKind::Postgres { .. } => "pg",
        };
        let dir = std::env::temp_dir().join(format!("di-test-own-{}-{what}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let port = free_port()?;
        let mut own = Own { kind, dir, port, child: None };
        if let OwnKind::Postgres { bin, root } = &own.kind {
            if *root {
                let owned = Command::new("chown").args(["postgres:postgres"]).arg(&own.dir).status();
                if !owned.is_ok_and(|s| s.success()) {
                    return Err(format!("cannot give {} to the `postgres` user", own.dir.display()));
                }
            }
            let init = as_owner(*root, &bin.join("initdb"))
                .arg("-D")
                .arg(own.dir.join("data"))
                .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
                .stdout(Stdio::null())
                .output()
                .map_err(|e| format!("running initdb: {e}"))?;
            if !init.status.success() {
                return Err(format!("initdb failed: {}", String::from_utf8_lossy(&init.stderr).trim()));
            }
        }
        // Stops the server once this process is gone (`Drop` does, while it lives).
        let watchdog = format!(
            "while [ -d /proc/{parent} ]; do sleep 1; done; \
             for f in '{dir}/server.pid' '{dir}/data/postmaster.pid'; do [ -f \"$f\" ] && kill -INT $(head -1 \"$f\") 2>/dev/null; done; \
             sleep 3; for f in '{dir}/server.pid' '{dir}/data/postmaster.pid'; do [ -f \"$f\" ] && kill -KILL $(head -1 \"$f\") 2>/dev/null; done; \
             rm -rf '{dir}'",
            parent = std::process::id(),
            dir = own.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &watchdog])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting a watchdog: {e}"))?;
        own.start()?;
        Ok(own)
    }

    /// Its URL: `nats://127.0.0.1:port`, or `postgres://postgres@127.0.0.1:port/postgres`.
    pub fn url(&self) -> String {
        match self.kind {
            OwnKind::Nats(_) => format!("nats://127.0.0.1:{}", self.port),
            OwnKind::Postgres { .. } => format!("postgres://postgres@127.0.0.1:{}/postgres", self.port),
        }
    }

    /// A new, empty database named `name` (PostgreSQL), as a URL.
    ///
    /// # Panics
    ///
    /// On a NATS server, or when the database cannot be made.
    pub fn database(&self, name: &str) -> String {
        let OwnKind::Postgres { bin, .. } = &self.kind else { panic!("a NATS server has no database") };
        let out = Command::new(bin.join("createdb"))
            .arg(format!("--maintenance-db={}", self.url()))
            .arg(name)
            .output()
            .unwrap_or_else(|e| panic!("createdb {name}: {e}"));
        assert!(out.status.success(), "createdb {name}: {}", String::from_utf8_lossy(&out.stderr));
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Starts the server (again), on the same port and folder; returns once it answers.
    ///
    /// # Errors
    ///
    /// When it does not answer within 30 s (its log, in the error).
    pub fn start(&mut self) -> Result<(), String> {
        let (mut command, log) = match &self.kind {
            OwnKind::Nats(server) => {
                let mut command = Command::new(server);
                command
                    .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string(), "-sd"])
                    .arg(self.dir.join("store"));
                (command, self.dir.join("nats.log"))
            }
            OwnKind::Postgres { bin, root } => {
                let mut command = as_owner(*root, &bin.join("postgres"));
                command.arg("-D").arg(self.dir.join("data")).args(["-p", &self.port.to_string(), "-k"]).arg(&self.dir);
                for setting in
                    ["listen_addresses=127.0.0.1", "fsync=off", "full_page_writes=off", "max_connections=200"]
                {
                    command.args(["-c", setting]);
                }
                (command, self.dir.join("postgres.log"))
            }
        };
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).map_err(|e| e.to_string())?;
        let from = out.metadata().map_err(|e| e.to_string())?.len();
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = command.stdin(Stdio::null()).stdout(out).stderr(err).spawn().map_err(|e| e.to_string())?;
        if let OwnKind::Nats(_) = self.kind {
            std::fs::write(self.dir.join("server.pid"), child.id().to_string()).map_err(|e| e.to_string())?;
        }
        self.child = Some(child);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            // The port answers for another process on it too: the server is ready when its
            // log says so, and fails when its process exits.
            if let Some(Ok(Some(status))) = self.child.as_mut().map(std::process::Child::try_wait) {
                self.child = None;
                return Err(format!(
                    "the server exited ({status}); its log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ));
            }
            if logged(&log, from, self.ready_line()) && self.answers() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "the server did not answer within 30 s; its log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        ))
    }

    /// What the server writes to its log once it takes connections.
    fn ready_line(&self) -> &'static str {
        match self.kind {
            OwnKind::Nats(_) => NATS_READY,
            OwnKind::Postgres { .. } => POSTGRES_READY,
        }
    }

    fn answers(&self) -> bool {
        match &self.kind {
            OwnKind::Nats(_) => std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
            OwnKind::Postgres { bin, .. } => Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
        }
    }

    /// Stops the server: PostgreSQL fast (open transactions rolled back, connections closed),
    /// NATS at once (SIGKILL, as a crash). Returns once it is gone.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        match self.kind {
            OwnKind::Nats(_) => {
                let _ = child.kill();
                let _ = std::fs::remove_file(self.dir.join("server.pid"));
            }
            // As root the child is `runuser`, whose child is the server: signalled by the pid
            // it writes.
            OwnKind::Postgres { .. } => {
                let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap_or_default();
                if let Some(pid) = pid.lines().next() {
                    let _ = Command::new("kill").args(["-INT", pid]).status();
                }
            }
        }
        let _ = child.wait();
        let started = Instant::now();
        while self.answers() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops NATS and removes its JetStream store: started again, it has no stream and no
    /// consumer, as a server that lost its disk.
    pub fn lose_store(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(self.dir.join("store"));
    }
}

impl Drop for Own {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_handed_out_once() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len());
    }

    /// A server that cannot have its port is an error with its log, even though the port
    /// answers (for the server that has it).
    #[test]
    fn a_server_whose_port_another_has_is_refused() {
        let Ok(first) = Own::nats("port-first") else { return };
        let dir = std::env::temp_dir().join(format!("di-test-own-{}-nats-port-second", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let OwnKind::Nats(server) = &first.kind else { unreachable!() };
        let mut second = Own { kind: OwnKind::Nats(server.clone()), dir, port: first.port, child: None };
        let err = second.start().expect_err("a second server on the port");
        assert!(err.contains("the server exited"), "{err}");
        assert!(err.contains("address already in use"), "{err}");
    }
}
