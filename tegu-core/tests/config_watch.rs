//! `AppBuilder::watch_config`: a change to a configuration file reloads the live
//! configuration once the watch interval has passed, without `App::reload_config`; requests
//! in flight keep their version; a broken file keeps the old one until it is mended; the watch
//! stops at shutdown.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tegu_core::{App, ProtoDef, config::ConfigRef};

#[derive(serde::Deserialize)]
struct Limits {
    n: u64,
    /// A value no log may show.
    #[allow(dead_code)]
    secret: String,
}

/// The watch interval of these tests.
const EVERY: Duration = Duration::from_millis(150);

/// How long a test waits at most for a reload the watch owes it: far past `EVERY`, so that a
/// busy machine does not fail it; a watch that does not work fails it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A fresh folder for test `name`, with `app.toml` in it holding `n`.
fn folder(name: &str, n: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("di-config-watch-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    write_in_place(&dir, n);
    dir
}

fn text(n: u64) -> String {
    format!("[limits]\nn = {n}\nsecret = \"hunter2\"\n")
}

/// Rewrites the file in place, as `echo > file` does.
fn write_in_place(dir: &Path, n: u64) {
    std::fs::write(dir.join("app.toml"), text(n)).unwrap();
}

/// Writes beside the file and renames over it, as editors and deploy tools do.
fn write_by_rename(dir: &Path, n: u64) {
    let tmp = dir.join("app.toml.tmp");
    std::fs::write(&tmp, text(n)).unwrap();
    std::fs::rename(&tmp, dir.join("app.toml")).unwrap();
}

async fn app(dir: &Path) -> (App, Arc<ConfigRef<Limits>>) {
    let app = App::builder()
        .without_inventory()
        .config_file_required(dir.join("app.toml"))
        .watch_config(EVERY)
        .register(ProtoDef::live_config::<Limits>("limits"))
        .build()
        .await
        .unwrap();
    let limits = app.get_object::<ConfigRef<Limits>>().unwrap();
    (app, limits)
}

/// What a request that begins now reads.
async fn seen_by_a_new_request(app: &App, limits: &ConfigRef<Limits>) -> u64 {
    app.run_in_context(async { limits.get().n }).await
}

/// Waits until a new request reads `n`, and says how long that took; fails past `PATIENCE`.
async fn until_new_requests_see(app: &App, limits: &ConfigRef<Limits>, n: u64) -> Duration {
    let since = Instant::now();
    while seen_by_a_new_request(app, limits).await != n {
        assert!(since.elapsed() < PATIENCE, "the watch did not reload `n = {n}` within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    since.elapsed()
}

/// The acceptance test: 1,000 concurrent requests read the section across awaits while the
/// file is rewritten 100 times and only the watch reloads it. No request sees two versions,
/// the reloads happen (requests see several versions between them), and after the last write
/// new requests see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_the_watch_reloads_and_no_request_sees_two_versions() {
    let dir = folder("load", 0);
    let (app, limits) = app(&dir).await;
    let app = Arc::new(app);
    let mixed = Arc::new(AtomicUsize::new(0));
    let versions = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let requests: Vec<_> = (0..1_000)
        .map(|i| {
            let (app, limits, mixed, versions) =
                (Arc::clone(&app), Arc::clone(&limits), Arc::clone(&mixed), Arc::clone(&versions));
            tokio::spawn(async move {
                // Spread over the rewrites: request i starts at about the time of write i / 10.
                tokio::time::sleep(Duration::from_millis(i % 100 * 15)).await;
                app.run_in_context(async {
                    let first = limits.get().n;
                    for _ in 0..5 {
                        tokio::time::sleep(Duration::from_millis(7)).await;
                        if limits.get().n != first {
                            mixed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    versions.lock().unwrap().insert(first);
                })
                .await;
            })
        })
        .collect();
    for n in 1..=100 {
        if n % 2 == 0 {
            write_by_rename(&dir, n)
        } else {
            write_in_place(&dir, n)
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    for request in requests {
        request.await.unwrap();
    }
    assert_eq!(mixed.load(Ordering::Relaxed), 0, "requests saw two versions");
    let took = until_new_requests_see(&app, &limits, 100).await;
    let versions = versions.lock().unwrap().len();
    assert!(versions >= 2, "the watch reloaded nothing while the requests ran ({versions} version seen)");
    println!(
        "after the last write, new requests saw it in {took:?} (watch interval {EVERY:?}); {versions} versions seen"
    );
    app.shutdown().await.unwrap();
}

/// A request in flight keeps its version while the watch reloads; the next one sees the new.
#[tokio::test]
async fn a_request_in_flight_keeps_its_version_while_the_watch_reloads() {
    let dir = folder("in-flight", 1);
    let (app, limits) = app(&dir).await;
    let (before, after) = app
        .run_in_context(async {
            let before = limits.get().n;
            write_by_rename(&dir, 2);
            // Long enough for the watch to reload: the app outside this request sees 2.
            let since = Instant::now();
            while seen_by_a_new_request(&app, &limits).await != 2 {
                assert!(since.elapsed() < PATIENCE, "the watch did not reload within {PATIENCE:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (before, limits.get().n)
        })
        .await;
    assert_eq!((before, after), (1, 1), "the request in flight saw the reload");
    assert_eq!(seen_by_a_new_request(&app, &limits).await, 2);
    app.shutdown().await.unwrap();
}

/// Many writes within one interval are read by one reload: one new version, not one per write.
#[tokio::test]
async fn writes_within_one_interval_are_one_reload() {
    let dir = folder("burst", 0);
    let app = App::builder()
        .without_inventory()
        .config_file_required(dir.join("app.toml"))
        // Long, so that the burst below surely fits in it.
        .watch_config(Duration::from_secs(1))
        .register(ProtoDef::live_config::<Limits>("limits"))
        .build()
        .await
        .unwrap();
    let limits = app.get_object::<ConfigRef<Limits>>().unwrap();
    let reloads = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&reloads);
    limits.on_change(move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    for n in 1..=20 {
        write_in_place(&dir, n);
    }
    until_new_requests_see(&app, &limits, 20).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await; // any reload still owed
    let reloads = reloads.load(Ordering::Relaxed);
    assert!(reloads < 20, "{reloads} reloads for 20 writes in one interval: the watch does not gather them");
    assert_eq!(limits.version_number(), 1 + reloads as u64);
    app.shutdown().await.unwrap();
}

/// A broken file keeps the old version, and the health report names key or source without the
/// value; mending the file reloads again.
#[tokio::test]
async fn a_broken_file_keeps_the_version_until_it_is_mended() {
    let dir = folder("broken", 1);
    let (app, limits) = app(&dir).await;
    std::fs::write(dir.join("app.toml"), "[limits]\nn = \"hunter2\"\nsecret = \"hunter2\"\n").unwrap();
    let since = Instant::now();
    let error = loop {
        if let Some(error) = app.health().await.config_error {
            break error;
        }
        assert!(since.elapsed() < PATIENCE, "the watch did not try the broken file within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(error.contains("limits.n") && error.contains("app.toml"), "{error}");
    assert!(!error.contains("hunter2"), "the error shows the value: {error}");
    assert_eq!(seen_by_a_new_request(&app, &limits).await, 1, "the broken file replaced the version");

    write_in_place(&dir, 3);
    until_new_requests_see(&app, &limits, 3).await;
    assert_eq!(app.health().await.config_error, None, "the mended file still shows the old error");
    app.shutdown().await.unwrap();
}

/// After shutdown, the watch reloads nothing.
#[tokio::test]
async fn shutdown_stops_the_watch() {
    let dir = folder("shutdown", 1);
    let (app, limits) = app(&dir).await;
    write_in_place(&dir, 2);
    until_new_requests_see(&app, &limits, 2).await; // the watch runs
    app.shutdown().await.unwrap();
    write_in_place(&dir, 3);
    tokio::time::sleep(EVERY * 5).await;
    assert_eq!(limits.get().n, 2, "the watch reloaded after shutdown");
}

/// What cannot be watched does not fail the build: an optional file in a folder that does not
/// exist (the folders that do are watched), an App without reloadable sections.
#[test]
fn what_cannot_be_watched_builds_and_says_so() {
    let dir = folder("nothing", 1);
    let missing = dir.join("no-such-folder").join("app.local.toml");
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ((), logs) = tegu_test_support::capture_logs(|| {
        runtime().block_on(async {
            let app = App::builder()
                .without_inventory()
                .config_file_required(dir.join("app.toml"))
                .config_file(&missing)
                .watch_config(EVERY)
                .register(ProtoDef::live_config::<Limits>("limits"))
                .build()
                .await
                .unwrap();
            write_in_place(&dir, 2);
            let limits = app.get_object::<ConfigRef<Limits>>().unwrap();
            until_new_requests_see(&app, &limits, 2).await;
            app.shutdown().await.unwrap();
        })
    });
    assert!(logs.contains("no-such-folder") && logs.contains("not watched"), "{logs}");

    let ((), logs) = tegu_test_support::capture_logs(|| {
        runtime().block_on(async {
            let app = App::builder()
                .without_inventory()
                .config_file_required(dir.join("app.toml"))
                .watch_config(EVERY)
                .register(ProtoDef::config::<Limits>("limits"))
                .build()
                .await
                .unwrap();
            app.shutdown().await.unwrap();
        })
    });
    assert!(logs.contains("no reloadable configuration section"), "{logs}");
}

/// Replaces the symbolic link `link` with one to `target`, in one rename, as deploy tools do
/// (`ln -s target link.tmp && mv -T link.tmp link`).
fn swap_link(link: &Path, target: &Path) {
    let name = link.file_name().unwrap().to_string_lossy();
    let tmp = link.with_file_name(format!("{name}_tmp"));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// A release layout: the file is read through `current`, a link to the release's folder,
/// which a deploy swaps. The watch sees the swap (in the folder holding the link), and then
/// watches the new release's folder for edits.
#[tokio::test]
async fn the_watch_follows_a_swapped_release_link() {
    let root = std::env::temp_dir().join(format!("di-config-watch-{}-release", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (release, n) in [("1", 1), ("2", 2)] {
        std::fs::create_dir_all(root.join("releases").join(release)).unwrap();
        write_in_place(&root.join("releases").join(release), n);
    }
    std::os::unix::fs::symlink("releases/1", root.join("current")).unwrap();
    let (app, limits) = app(&root.join("current")).await;
    assert_eq!(seen_by_a_new_request(&app, &limits).await, 1);
    swap_link(&root.join("current"), Path::new("releases/2"));
    until_new_requests_see(&app, &limits, 2).await;
    write_by_rename(&root.join("releases/2"), 3);
    until_new_requests_see(&app, &limits, 3).await;
    app.shutdown().await.unwrap();
}

/// A file linked into a Kubernetes ConfigMap mount: `app.toml` links to the mount's
/// `app.toml`, itself a link through `..data`, a link to the current version's folder, which
/// the kubelet swaps (a new folder, `..data_tmp` renamed over `..data`, the old folder
/// removed). The watch sees the swap in the mount, outside the file's own folder.
#[tokio::test]
async fn the_watch_follows_a_configmap_update() {
    let root = std::env::temp_dir().join(format!("di-config-watch-{}-configmap", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (mount, etc) = (root.join("mount"), root.join("etc"));
    std::fs::create_dir_all(mount.join("..2026_12_06_v1")).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    write_in_place(&mount.join("..2026_12_06_v1"), 1);
    std::os::unix::fs::symlink("..2026_12_06_v1", mount.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/app.toml", mount.join("app.toml")).unwrap();
    std::os::unix::fs::symlink(mount.join("app.toml"), etc.join("app.toml")).unwrap();
    let (app, limits) = app(&etc).await;
    assert_eq!(seen_by_a_new_request(&app, &limits).await, 1);
    std::fs::create_dir_all(mount.join("..2026_12_06_v2")).unwrap();
    write_in_place(&mount.join("..2026_12_06_v2"), 2);
    swap_link(&mount.join("..data"), Path::new("..2026_12_06_v2"));
    std::fs::remove_dir_all(mount.join("..2026_12_06_v1")).unwrap();
    until_new_requests_see(&app, &limits, 2).await;
    app.shutdown().await.unwrap();
}
