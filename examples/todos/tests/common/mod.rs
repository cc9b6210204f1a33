//! The example's binary, run as an operator runs it: a process of its own, on a free port.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tegu_test_support::Lines;

/// The binary, started on a free port.
pub(crate) struct Binary {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its SQLite file, removed when it is dropped (if it has one of its own).
    pub(crate) db: Option<PathBuf>,
    /// The lines of its log (stderr) so far, when started by [`Binary::start_logged`]; none
    /// otherwise (stderr goes to null).
    #[allow(dead_code)]
    pub(crate) logs: Lines,
}

impl Binary {
    /// With a SQLite database of its own, named after `name`.
    #[allow(dead_code)]
    pub(crate) fn start(name: &str) -> Binary {
        let db = tegu_test_support::fresh_sqlite(&format!("todos-bin-{name}"));
        let mut binary = Binary::start_with(&[("TODOS_DB__PATH", &db.display().to_string())]);
        binary.db = Some(db);
        binary
    }

    /// With the environment variables `env`, on a free port.
    pub(crate) fn start_with(env: &[(&str, &str)]) -> Binary {
        Binary::spawn(env, false)
    }

    /// As [`start_with`](Self::start_with), its log lines (stderr) collected into
    /// [`logs`](Self::logs) as they come.
    #[allow(dead_code)]
    pub(crate) fn start_logged(env: &[(&str, &str)]) -> Binary {
        Binary::spawn(env, true)
    }

    fn spawn(env: &[(&str, &str)], logged: bool) -> Binary {
        let mut command = Command::new(env!("CARGO_BIN_EXE_example-todos"));
        let stderr = if logged { Stdio::piped() } else { Stdio::null() };
        command.env("TODOS_HTTP__ADDR", "127.0.0.1:0").stdout(Stdio::piped()).stderr(stderr);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the example's binary starts");
        let logs = Lines::default();
        if let Some(stderr) = child.stderr.take() {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                    logs.push(line);
                }
            });
        }
        let stdout = child.stdout.take().unwrap();
        let (found, addr) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("todos on http://") {
                    let addr: SocketAddr = rest.split(',').next().unwrap().parse().unwrap();
                    if let Some(found) = found.take() {
                        found.send(addr).unwrap();
                    }
                }
            }
        });
        let addr = addr.recv_timeout(Duration::from_secs(60)).expect("the binary prints its address");
        Binary { child, addr, db: None, logs }
    }

    /// Sends `signal` (`TERM`, `KILL`, ...) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("sh").arg("-c").arg(format!("kill -{signal} {}", self.child.id())).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `within`: its exit status.
    pub(crate) fn exited_within(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the binary did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(db) = &self.db {
            tegu_test_support::remove_sqlite(db);
        }
    }
}
