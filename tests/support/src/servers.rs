//! Real servers for the tests that need them, from Debian's packages, on loopback with
//! throwaway data: a PostgreSQL cluster, a NATS server with JetStream.
//!
//! - `DI_TEST_POSTGRES_URL` (`DI_TEST_NATS_URL`) set: that server.
//! - Otherwise a cluster of this test process's own: `initdb` into a temporary folder (as the
//!   `postgres` user when the tests run as root, which PostgreSQL refuses to run as), a free
//!   port on 127.0.0.1, `fsync` off. A watchdog stops it and removes its folder when the test
//!   process is gone.
//!   NATS the same way ([`nats`]): `nats-server -js`, its store in a temporary folder.
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("finding a free port: {e}"))?
        .port();
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
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(format!("nats://127.0.0.1:{port}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    Err(format!("nats-server did not answer within 30 s; its log:\n{log}"))
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("finding a free port: {e}"))?
        .port();
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
        if ready.is_ok_and(|s| s.success()) {
            return Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    Err(format!("postgres did not answer within 30 s; its log:\n{log}"))
}
