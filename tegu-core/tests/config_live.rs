//! Live configuration: `ConfigRef<T>` reads the version its scope pinned at its first read,
//! `App::reload_config` makes a new one for the scopes after it, a broken file changes nothing
//! and says why without the value.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tegu_core::{
    App, AppBuilder, DiError, ProtoDef,
    config::ConfigRef,
    registry::{Dependency, InjectKind},
};

/// A reloadable section, with a field a log must never show.
#[derive(serde::Deserialize)]
struct Left {
    n: u64,
    secret: String,
}

/// A second reloadable section, written with the same `n` as `Left` each time.
#[derive(serde::Deserialize)]
struct Right {
    n: u64,
}

/// A section that is not reloadable.
#[derive(serde::Deserialize)]
struct Fixed {
    n: u64,
}

struct Reader {
    left: Arc<ConfigRef<Left>>,
    right: Arc<ConfigRef<Right>>,
    fixed: Arc<Fixed>,
}

/// A fresh configuration file for test `name`.
fn file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("di-config-live-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("app.toml")
}

fn write(path: &PathBuf, n: u64) {
    let text = format!("[left]\nn = {n}\nsecret = \"hunter2\"\n\n[right]\nn = {n}\n\n[fixed]\nn = {n}\n");
    // Written beside and renamed over: a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn builder(path: &PathBuf) -> AppBuilder {
    App::builder()
        .without_inventory()
        .config_file_required(path)
        .register(ProtoDef::live_config::<Left>("left"))
        .register(ProtoDef::live_config::<Right>("right"))
        .register(ProtoDef::config::<Fixed>("fixed"))
        .register(
            ProtoDef::singleton::<Reader>(|r| Ok(Reader { left: r.arc(0)?, right: r.arc(1)?, fixed: r.arc(2)? }))
                .dep(Dependency::new::<ConfigRef<Left>>(InjectKind::Arc, None))
                .dep(Dependency::new::<ConfigRef<Right>>(InjectKind::Arc, None))
                .dep(Dependency::new::<Fixed>(InjectKind::Arc, None)),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_each_see_one_version_while_the_file_is_rewritten_a_hundred_times() {
    let path = file("load");
    write(&path, 0);
    let app = builder(&path).build().await.unwrap();
    let reader = app.get_object::<Reader>().unwrap();
    let writing = Arc::new(AtomicBool::new(true));
    let started = Arc::new(AtomicUsize::new(0));

    let mut requests = Vec::new();
    for _ in 0..1000 {
        let (app, reader, writing, started) = (app.clone(), reader.clone(), writing.clone(), started.clone());
        requests.push(tokio::spawn(async move {
            app.run_in_context(async move {
                let first = (reader.left.get().n, reader.right.get().n, reader.left.version_number());
                started.fetch_add(1, Ordering::SeqCst);
                let mut reads = 0;
                // Reads across awaits for as long as the file is being rewritten, and a few more.
                while writing.load(Ordering::SeqCst) || reads < 3 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let now = (reader.left.get().n, reader.right.get().n, reader.left.version_number());
                    assert_eq!(now, first, "one request saw two versions");
                    // A task of the scope sees the scope's version too.
                    let from_task = tegu_core::spawn({
                        let reader = reader.clone();
                        async move { reader.right.get().n }
                    });
                    assert_eq!(from_task.await.unwrap(), first.1, "a task of the request saw another version");
                    reads += 1;
                }
                first
            })
            .await
        }));
    }
    // Every request has pinned its version before the first rewrite.
    while started.load(Ordering::SeqCst) < 1000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut seen_midway = std::collections::BTreeSet::new();
    for n in 1..=100 {
        write(&path, n);
        let reload = app.reload_config().unwrap();
        assert_eq!(reload.version, n + 1);
        assert_eq!(reload.changed, ["left", "right"], "the fixed section is not reloadable");
        // A request that begins now sees the new version, the old ones keep theirs.
        let fresh = app.run_in_context(async { (reader.left.get().n, reader.right.get().n) }).await;
        assert_eq!(fresh, (n, n));
        seen_midway.insert(fresh.0);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    writing.store(false, Ordering::SeqCst);
    for request in requests {
        assert_eq!(request.await.unwrap(), (0, 0, 1), "the requests began before the first rewrite");
    }
    assert_eq!(seen_midway.len(), 100);
    // Outside a scope: the newest. The section that is not reloadable: as built.
    assert_eq!((reader.left.get().n, reader.fixed.n), (100, 0));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_broken_file_keeps_the_version_and_names_key_and_source_without_the_value() {
    let path = file("broken");
    write(&path, 1);
    let app = builder(&path).health_cache(Duration::ZERO).build().await.unwrap();
    let reader = app.get_object::<Reader>().unwrap();

    // A value that does not read as its type.
    std::fs::write(&path, "[left]\nn = \"fourty-two\"\nsecret = \"hunter2\"\n[right]\nn = 2\n[fixed]\nn = 2\n")
        .unwrap();
    let err = app.reload_config().unwrap_err();
    assert!(
        matches!(&err, DiError::ConfigInvalid { key, origin: Some(origin), .. }
        if key == "left.n" && origin.contains("app.toml")),
        "{err:?}"
    );
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("fourty-two") && !shown.contains("hunter2"), "the error shows a value: {shown}");
    assert_eq!((reader.left.get().n, reader.right.get().n, reader.left.version_number()), (1, 1, 1));
    let health = app.health().await;
    assert!(health.ready, "a broken reload does not take the App out of its load balancer");
    let why = health.config_error.expect("the health report says the reload failed");
    assert!(why.contains("left.n") && !why.contains("fourty-two"), "{why}");

    // A file that does not parse: its line, no text of it.
    std::fs::write(&path, "[left\nsecret = \"hunter2\"\n").unwrap();
    let err = app.reload_config().unwrap_err();
    assert!(matches!(&err, DiError::ConfigSource { source_name, .. } if source_name.contains("app.toml")), "{err:?}");
    assert!(err.to_string().contains("line 1"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    assert_eq!(reader.right.get().n, 1);

    // Fixed: the next reload takes it, and the report clears.
    write(&path, 3);
    assert_eq!(app.reload_config().unwrap().version, 2);
    assert_eq!((reader.left.get().n, reader.left.get().secret.as_str()), (3, "hunter2"));
    assert!(app.health().await.config_error.is_none());
}

#[tokio::test]
async fn change_hooks_run_for_the_sections_that_changed_and_a_panicking_one_harms_nothing() {
    let path = file("hooks");
    write(&path, 1);
    let app = builder(&path).build().await.unwrap();
    let reader = app.get_object::<Reader>().unwrap();
    let left_seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let right_calls = Arc::new(AtomicUsize::new(0));
    reader.left.on_change(|_| panic!("a hook that panics"));
    reader.left.on_change({
        let seen = left_seen.clone();
        move |left: Arc<Left>| seen.lock().unwrap().push(left.n)
    });
    reader.right.on_change({
        let calls = right_calls.clone();
        move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
        }
    });
    let right_before = reader.right.get();

    // Only `left` changes: `right` keeps its object, and its hook does not run.
    std::fs::write(&path, "[left]\nn = 2\nsecret = \"s\"\n\n[right]\nn = 1\n\n[fixed]\nn = 1\n").unwrap();
    let reload = app.reload_config().unwrap();
    assert_eq!((reload.version, reload.changed.as_slice()), (2, &["left".to_owned()][..]));
    assert!(Arc::ptr_eq(&right_before, &reader.right.get()), "an unchanged section keeps its object");
    assert_eq!(right_calls.load(Ordering::SeqCst), 0);
    // Nothing changed: no new version, no hook.
    let same = app.reload_config().unwrap();
    assert_eq!((same.version, same.changed.len()), (2, 0));
    write(&path, 5);
    app.reload_config().unwrap();
    assert_eq!(*left_seen.lock().unwrap(), [2, 5]);
    assert_eq!(right_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_reloadable_section_taken_as_arc_fails_the_build_naming_config_ref() {
    let path = file("arc");
    write(&path, 1);
    let app = || {
        App::builder()
            .without_inventory()
            .config_file_required(&path)
            .register(ProtoDef::live_config::<Left>("left"))
            .register(
                ProtoDef::singleton::<Fixed>(|r| r.arc::<Left>(0).map(|l| Fixed { n: l.n }))
                    .dep(Dependency::new::<Left>(InjectKind::Arc, None)),
            )
    };
    let err = app().build().await.expect_err("a reloadable section is no proto of its own type");
    assert!(err.to_string().contains("ConfigRef<config_live::Left>"), "{err}");
    assert_eq!(app().check().unwrap_err().to_string(), err.to_string());
}

#[tokio::test]
async fn a_section_that_no_longer_reads_at_build_fails_the_build() {
    let path = file("build");
    std::fs::write(&path, "[left]\nn = 1\n[right]\nn = 1\n[fixed]\nn = 1\n").unwrap();
    let err = builder(&path).build().await.expect_err("`left.secret` is missing");
    assert!(matches!(&err, DiError::ConfigMissing { key, .. } if key == "left.secret"), "{err:?}");
}

/// The attribute form: `#[config_proto(.., reloadable)]` and `#[inject] x: ConfigRef<T>`.
pub mod annotated {
    use tegu_core::{App, config::ConfigRef, config_proto, context_proto, singleton_proto};

    /// A reloadable section.
    #[config_proto(prefix = "greeting", reloadable)]
    #[derive(serde::Deserialize, Debug)]
    pub struct Greeting {
        /// The word.
        pub word: String,
    }

    /// A singleton holding the section.
    #[singleton_proto]
    #[derive(Debug)]
    pub struct Greeter {
        #[inject]
        greeting: ConfigRef<Greeting>,
    }

    /// A context proto holding it too: it reads its scope's version.
    #[context_proto]
    #[derive(Debug)]
    pub struct Reply {
        #[inject]
        greeting: ConfigRef<Greeting>,
    }

    #[tokio::test]
    async fn the_attributes_register_and_inject_a_reloadable_section() {
        let path = super::file("annotated");
        std::fs::write(&path, "[greeting]\nword = \"hello\"\n").unwrap();
        let app = App::builder()
            .without_inventory()
            .link::<Greeting>()
            .link::<Greeter>()
            .link::<Reply>()
            .config_file_required(&path)
            .build()
            .await
            .unwrap();
        let greeter = app.get_object::<Greeter>().unwrap();
        let words = app
            .run_in_context(async {
                let first = greeter.greeting.get().word.clone();
                std::fs::write(&path, "[greeting]\nword = \"bonjour\"\n").unwrap();
                app.reload_config().unwrap();
                let reply = app.get_object::<Reply>().unwrap();
                (first, reply.greeting.get().word.clone())
            })
            .await;
        assert_eq!(words, ("hello".to_owned(), "hello".to_owned()));
        assert_eq!(greeter.greeting.get().word, "bonjour");
        // `Greeting` itself is no proto: a version would otherwise be held forever.
        assert!(app.get_object::<Greeting>().is_err());
    }
}

/// Once shutdown has begun, a reload is refused, saying why: its change hooks would run on
/// singletons being destroyed. The version stays.
#[tokio::test]
async fn a_reload_after_shutdown_is_refused_and_runs_no_hook() {
    let path = file("after-shutdown");
    write(&path, 1);
    let app = builder(&path).build().await.unwrap();
    let reader = app.get_object::<Reader>().unwrap();
    let hooked = Arc::new(AtomicBool::new(false));
    reader.left.on_change({
        let hooked = hooked.clone();
        move |_| hooked.store(true, Ordering::SeqCst)
    });
    app.shutdown().await.unwrap();
    write(&path, 2);
    let refused = app.reload_config();
    assert!(matches!(refused, Err(DiError::ReloadAfterShutdown)), "{refused:?}");
    assert!(refused.unwrap_err().to_string().contains("shutting down"));
    assert!(!hooked.load(Ordering::SeqCst), "a change hook ran after shutdown");
    assert_eq!(reader.left.get().n, 1);
}

/// A task of a request that outlives the scope's end (past the background-task timeout) keeps
/// the version if it read any section before the end; one whose first read comes after the
/// end has no version of its scope's left (gone with the scope's objects): it reads the newest,
/// as outside any scope, and that is logged once.
#[test]
fn a_task_that_outlived_its_scope_reads_the_newest_version_and_says_so() {
    let path = file("outlived");
    write(&path, 1);
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        runtime.block_on(async {
            let app = builder(&path).background_task_timeout(Duration::from_secs(1)).build().await.unwrap();
            let reader = app.get_object::<Reader>().unwrap();
            let (reloaded, reload) = tokio::sync::oneshot::channel::<()>();
            let (seen_by_request, task) = app
                .run_in_context(async {
                    let seen = reader.left.get().n;
                    let reader = Arc::clone(&reader);
                    let early = Arc::clone(&reader);
                    let kept = tegu_core::spawn(async move {
                        let right = early.right.get().n; // a read before the end: the version is kept
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        (right, early.left.get().n)
                    });
                    let late = tegu_core::spawn(async move {
                        reload.await.unwrap();
                        reader.left.get().n
                    });
                    (seen, (kept, late))
                })
                .await;
            tokio::time::sleep(Duration::from_secs(2)).await; // past the timeout: the scope ended
            write(&path, 2);
            app.reload_config().unwrap();
            reloaded.send(()).unwrap();
            let (kept, late) = task;
            assert_eq!((seen_by_request, kept.await.unwrap()), (1, (1, 1)));
            assert_eq!(late.await.unwrap(), 2, "a first read after the scope's end sees the newest");
            app.shutdown().await.unwrap();
        });
    });
    assert!(logs.contains("after its scope ended"), "{logs}");
}
