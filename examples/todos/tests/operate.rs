//! The service as an operator sees it, black-box: the binary `cargo run -p example-todos`
//! builds, on a socket. Its probes over HTTP/1.1 and HTTP/2 (`curl --http2-prior-knowledge`),
//! its metrics, SIGTERM with the drain delay of its configuration, and readiness when the
//! database goes away.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Binary;

use tegu_test_support::eventually;
use tegu_test_support::http_client::send;

/// `curl --http2-prior-knowledge`: the status and body.
fn curl_h2(addr: SocketAddr, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "-w", "\n%{http_code} %{http_version}"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs (.ci/run installs it)");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    let (code, version) = status.split_once(' ').unwrap();
    assert_eq!(version, "2", "answered over HTTP/2: {text}");
    (code.parse().unwrap(), body.to_owned())
}

/// A metric's value in Prometheus' text format.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_metrics_http2_and_sigterm_with_the_drain_delay() {
    let mut binary = Binary::start("operate");
    let addr = binary.addr;

    // Serving: both probes answer 200 with JSON, over HTTP/1.1 and HTTP/2 alike.
    let live = send(addr, "GET", "/health/live", &[], b"").await;
    assert_eq!((live.status, live.header("content-type")), (200, Some("application/json")));
    let ready = send(addr, "GET", "/health/ready", &[], b"").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let json: serde_json::Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!((json["status"].as_str(), json["checks"][0]["name"].as_str()), (Some("up"), Some("db")));
    assert_eq!(curl_h2(addr, "/health/live"), (200, live.body.clone()));
    let (status, body) = curl_h2(addr, "/health/ready");
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["status"], "up");
    let created =
        send(addr, "POST", "/users/ada/todos", &[("content-type", "application/json")], br#"{"title":"ops"}"#).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (status, body) = curl_h2(addr, "/users/ada/todos");
    assert_eq!(status, 200);
    assert_eq!(body, send(addr, "GET", "/users/ada/todos", &[], b"").await.body, "the same answer over HTTP/2");

    // The metrics list the scope and handler metrics; once idle, no scope is open.
    let text = eventually(async || {
        let text = send(addr, "GET", "/metrics", &[], b"").await.body;
        (metric(&text, "di_scopes_open") == Some(0.0) && metric(&text, "di_scopes_ending") == Some(0.0)).then_some(text)
    })
    .await;
    for name in ["di_scope_duration_seconds", "di_event_handlers_running"] {
        assert!(text.contains(name), "{name} missing from /metrics:\n{text}");
    }

    // SIGTERM: readiness says "stopping" at once, requests are still served for the 3 s drain
    // delay of config/todos.toml, then the process exits within its deadline.
    let signalled = Instant::now();
    binary.signal("TERM");
    let body = eventually(async || {
        let ready = send(addr, "GET", "/health/ready", &[], b"").await;
        ready.body.contains(r#""state":"stopping""#).then_some(ready.body)
    })
    .await;
    assert!(body.contains(r#""status":"down""#), "{body}");
    assert_eq!(send(addr, "GET", "/health/live", &[], b"").await.status, 200);
    let listed = send(addr, "GET", "/users/ada/todos", &[], b"").await;
    assert_eq!(listed.status, 200, "still served during the drain delay: {}", listed.body);
    let status = binary.exited_within(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() >= Duration::from_millis(2900), "served for the drain delay first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_makes_it_unready_naming_the_check_while_it_stays_live() {
    let binary = Binary::start("lost-db");
    let addr = binary.addr;
    assert_eq!(send(addr, "GET", "/health/ready", &[], b"").await.status, 200);
    // The database goes away: not ready, naming the check; still live.
    tegu_test_support::remove_sqlite(binary.db.as_ref().unwrap());
    let body = eventually(async || {
        let ready = send(addr, "GET", "/health/ready", &[], b"").await;
        (ready.status == 503).then_some(ready.body)
    })
    .await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((json["checks"][0]["name"].as_str(), json["checks"][0]["status"].as_str()), (Some("db"), Some("down")));
    assert_eq!(json["state"], "serving");
    assert_eq!(send(addr, "GET", "/health/live", &[], b"").await.status, 200);
}
