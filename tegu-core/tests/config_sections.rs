//! Configuration sections, constructors, multi-instance protos, profiles and `exclude`,
//! through the macros. Each test links exactly the protos it builds (`without_inventory`
//! plus `link`), so that one test's broken configuration cannot fail another's build.
//!
//! Environment variables are set in a child process running the same test (`in_child`):
//! setting them in this process would need `unsafe` and would leak into concurrent tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::Deserialize;
use tegu_core::{App, AsyncContextRef, DiError, Keyed, ProtoDef, config_proto, context_proto, singleton_proto};

use child_env::in_child;
use tegu_test_support::child_env;

#[config_proto(prefix = "db")]
#[derive(Debug, Deserialize)]
struct DbConfig {
    url: String,
    #[serde(default = "four")]
    pool: u32,
}

fn four() -> u32 {
    4
}

/// Every field has a default: no configuration needed.
#[config_proto(prefix = "http")]
#[derive(Debug, Deserialize)]
struct HttpConfig {
    #[serde(default = "default_port")]
    port: u16,
    #[serde(default)]
    tls: Option<Tls>,
}

#[derive(Debug, Deserialize)]
struct Tls {
    cert: String,
}

fn default_port() -> u16 {
    7001
}

/// A fresh folder for this test's files, removed with them when the test ends (passed or not).
fn folder(test: &str) -> Folder {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "di-config-{}-{test}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    Folder(dir)
}

struct Folder(PathBuf);

impl std::ops::Deref for Folder {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn db_app() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<DbConfig>()
}

#[tokio::test]
async fn files_then_env_then_values_whatever_the_call_order() {
    if !in_child(
        "files_then_env_then_values_whatever_the_call_order",
        &[("CFG1_DB__POOL", "2"), ("CFG1_DB__URL", "env")],
    ) {
        return;
    }
    let dir = folder("precedence");
    let base = write(&dir, "app.toml", "[db]\nurl = \"file\"\npool = 1\n");
    let local = write(&dir, "app.local.toml", "[db]\nurl = \"local file\"\n");
    let app = db_app()
        .config_value("db.url", "value") // highest, though given first
        .config_env("CFG1_")
        .config_file(&base)
        .config_file(&local) // a later file wins over an earlier one
        .build()
        .await
        .unwrap();
    let db = app.get_object::<DbConfig>().unwrap();
    assert_eq!((db.url.as_str(), db.pool), ("value", 2));
    assert_eq!(app.config().origin("db.pool").as_deref(), Some("env CFG1_DB__POOL"));
    assert!(
        app.config()
            .origin("db.url")
            .unwrap()
            .starts_with("config_value(\"db.url\") at tegu-core/tests/config_sections.rs:")
    );

    let app = db_app().config_file(&base).config_file(&local).build().await.unwrap();
    let db = app.get_object::<DbConfig>().unwrap();
    assert_eq!((db.url.as_str(), db.pool), ("local file", 1));
    assert_eq!(app.config().origin("db.url"), Some(format!("file {}", local.display())));
    assert_eq!(app.config().origin("db.pool"), Some(format!("file {}", base.display())));
}

#[tokio::test]
async fn environment_values_are_read_as_the_field_asks() {
    let name = "environment_values_are_read_as_the_field_asks";
    if !in_child(name, &[("CFG3_DB__URL", "1234"), ("CFG3_DB__POOL", "7"), ("CFG3_FLAGS__BETA", "true")]) {
        return;
    }
    // `flags` is read by code after `build()`, declared so that its variables are not refused.
    let app = db_app().config_env("CFG3_").config_known("flags").build().await.unwrap();
    let db = app.get_object::<DbConfig>().unwrap();
    assert_eq!((db.url.as_str(), db.pool), ("1234", 7), "digits are a fine string, and a fine number");
    assert!(app.config().get::<bool>("flags.beta").unwrap());
    assert_eq!(app.config().get::<String>("flags.beta").unwrap(), "true");
}

#[tokio::test]
async fn absent_sections_and_fields_take_their_serde_defaults() {
    let app = App::builder().without_inventory().link::<HttpConfig>().build().await.unwrap();
    let http = app.get_object::<HttpConfig>().unwrap();
    assert_eq!(http.port, 7001);
    assert!(http.tls.is_none());
    assert!(!app.config().contains("http"));

    let app = App::builder()
        .without_inventory()
        .link::<HttpConfig>()
        .config_value("http.tls.cert", "/etc/cert.pem")
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object::<HttpConfig>().unwrap().tls.as_ref().unwrap().cert, "/etc/cert.pem");
}

#[tokio::test]
async fn a_profile_reads_the_files_profile_variant_after_it() {
    let dir = folder("profile");
    let base = write(&dir, "app.toml", "[db]\nurl = \"dev\"\npool = 1\n");
    write(&dir, "app.prod.toml", "[db]\nurl = \"prod\"\n");
    let app = db_app().config_file(&base).profile("prod").build().await.unwrap();
    let db = app.get_object::<DbConfig>().unwrap();
    assert_eq!((db.url.as_str(), db.pool), ("prod", 1));
    assert_eq!(app.config().profile(), Some("prod"));

    let app = db_app().config_file(&base).build().await.unwrap();
    assert_eq!(app.get_object::<DbConfig>().unwrap().url, "dev");
    let app = db_app().config_file(&base).profile("staging").build().await.unwrap(); // no variant: fine
    assert_eq!(app.get_object::<DbConfig>().unwrap().url, "dev");
}

#[tokio::test]
async fn config_get_reads_any_key_at_run_time() {
    // Read by code after build: declared, or `build()` refuses the keys as unknown.
    let app = App::builder()
        .without_inventory()
        .config_known("features")
        .config_value("features", serde_json_like())
        .build()
        .await
        .unwrap();
    assert_eq!(app.config().get::<Vec<String>>("features.beta").unwrap(), ["search", "export"]);
    assert_eq!(app.config().get::<Option<u32>>("features.limit").unwrap(), None);
    let e = app.config().get::<u32>("features.limit").unwrap_err();
    assert_eq!(
        e.to_string(),
        "config key features.limit is missing (`u32` needs it; set it with `config_file`, `config_env` or `config_value` on the AppBuilder)"
    );
    let e = app.config().get::<u32>("features.beta").unwrap_err().to_string();
    assert!(e.starts_with("config key features.beta of `u32`: invalid type: expected u32, found a list (from config_value(\"features\") at tegu-core/tests/config_sections.rs:"), "{e}");
}

fn serde_json_like() -> std::collections::BTreeMap<&'static str, Vec<&'static str>> {
    [("beta", vec!["search", "export"])].into_iter().collect()
}

// ---- errors -------------------------------------------------------------------------------

#[tokio::test]
async fn a_value_of_the_wrong_type_names_the_key_the_section_and_the_variable() {
    if !in_child("a_value_of_the_wrong_type_names_the_key_the_section_and_the_variable", &[("CFG2_DB__POOL", "many")]) {
        return;
    }
    let e = db_app().config_value("db.url", "x").config_env("CFG2_").build().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "config key db.pool of `config_sections::DbConfig`: invalid type: expected u32, found a string of 4 characters (from env CFG2_DB__POOL)"
    );
}

#[tokio::test]
async fn a_missing_key_says_where_it_could_be_set() {
    let dir = folder("missing");
    let file = write(&dir, "app.toml", "[db]\npool = 2\n");
    let e = db_app().config_file(&file).config_env("APP_").build().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "config key db.url is missing (`config_sections::DbConfig` needs it; set it in {} or APP_DB__URL)",
            file.display()
        )
    );
    let e = db_app().build().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "config key db.url is missing (`config_sections::DbConfig` needs it; set it with `config_file`, `config_env` or `config_value` on the AppBuilder)"
    );
}

#[tokio::test]
async fn errors_from_files_and_values_name_them() {
    let dir = folder("file-errors");
    let file = write(&dir, "app.toml", "[db]\nurl = \"x\"\npool = -3\n");
    let e = db_app().config_file(&file).build().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "config key db.pool of `config_sections::DbConfig`: invalid value: expected u32, found a negative integer (from file {})",
            file.display()
        )
    );
    let e = db_app().config_value("db", "sqlite::memory:").build().await.unwrap_err().to_string();
    assert!(
        e.starts_with("config key db of `config_sections::DbConfig`: invalid type: expected struct DbConfig, found a string of 15 characters (from config_value(\"db\") at tegu-core/tests/config_sections.rs:"),
        "{e}"
    );
}

#[tokio::test]
async fn every_config_error_comes_back_at_once_with_the_graph_errors() {
    let dir = folder("many-errors");
    let file = write(&dir, "app.toml", "[http]\nport = \"high\"\n");
    let e = App::builder()
        .without_inventory()
        .link::<DbConfig>()
        .link::<HttpConfig>()
        .link::<NeedsMissing>()
        .config_file(&file)
        .build()
        .await
        .unwrap_err();
    let DiError::Multiple(errors) = &e else { panic!("expected several errors, got {e}") };
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{text:#?}");
    assert!(text.iter().any(|t| t.starts_with("config key db.url is missing")), "{text:#?}");
    assert!(
        text.iter().any(|t| t.starts_with(
            "config key http.port of `config_sections::HttpConfig`: invalid type: expected u16, found a string of 4 characters"
        )),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|t| t.contains("injects `config_sections::Unregistered`, but no proto provides it")),
        "{text:#?}"
    );
}

struct Unregistered;

#[singleton_proto]
struct NeedsMissing {
    #[inject(external)]
    _missing: Arc<Unregistered>,
}

#[tokio::test]
async fn a_malformed_file_fails_the_build_and_a_missing_one_only_if_required() {
    let dir = folder("malformed");
    let file = write(&dir, "app.toml", "[db\nurl = 1\n");
    let e = db_app().config_file(&file).build().await.unwrap_err().to_string();
    assert!(e.starts_with(&format!("file {}: ", file.display())), "{e}");

    let absent = dir.join("absent.toml");
    let app = App::builder().without_inventory().config_file(&absent).build().await;
    assert!(app.is_ok(), "an optional file may be missing");
    let e = App::builder().without_inventory().config_file_required(&absent).build().await.unwrap_err();
    assert_eq!(e.to_string(), format!("file {}: not found", absent.display()));
}

// ---- constructors -------------------------------------------------------------------------

trait Clock: Send + Sync {
    fn now(&self) -> u64;
}

#[singleton_proto(name = "primary", provides(dyn Clock))]
struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> u64 {
        42
    }
}

static DB_CLOSED: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug)]
struct DbError(String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

struct Db {
    url: String,
    opened_at: u64,
}

/// The example, as written.
#[singleton_proto(destroy = close)]
impl Db {
    async fn new(config: Arc<DbConfig>, #[inject(name = "primary")] clock: Arc<dyn Clock>) -> Result<Self, DbError> {
        tokio::task::yield_now().await; // a real pool would connect here
        if config.url.starts_with("bad:") {
            return Err(DbError(format!("cannot connect to {}", config.url)));
        }
        Ok(Db { url: config.url.clone(), opened_at: clock.now() })
    }

    async fn close(&self) {
        DB_CLOSED.fetch_add(1, Ordering::SeqCst);
    }
}

struct Repo {
    db: Arc<Db>,
}

/// A sync constructor after an async one: built once the Db is.
#[singleton_proto]
impl Repo {
    fn new(db: Arc<Db>) -> Repo {
        Repo { db }
    }
}

fn db_graph() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<DbConfig>().link::<FixedClock>().link::<Db>().link::<Repo>()
}

#[tokio::test]
async fn async_and_sync_constructors_build_in_dependency_order() {
    let app = db_graph().config_value("db.url", "sqlite::memory:").build().await.unwrap();
    let repo = app.get_object::<Repo>().unwrap();
    assert_eq!((repo.db.url.as_str(), repo.db.opened_at), ("sqlite::memory:", 42));
    assert!(Arc::ptr_eq(&repo.db, &app.get_object::<Db>().unwrap()));
    let before = DB_CLOSED.load(Ordering::SeqCst);
    app.shutdown().await.unwrap();
    assert!(DB_CLOSED.load(Ordering::SeqCst) > before, "the impl attribute's destroy hook ran");
}

#[tokio::test]
async fn a_failing_constructor_fails_the_build_naming_the_proto() {
    let e = db_graph().config_value("db.url", "bad:host").build().await.unwrap_err();
    assert_eq!(e.to_string(), "construction of `config_sections::Db` (\"db\") failed: cannot connect to bad:host");
    assert!(matches!(e, DiError::Construction { .. }));
}

struct Panicky;

#[singleton_proto]
impl Panicky {
    fn new(_clock: Arc<dyn Clock>) -> Result<Self, std::io::Error> {
        Err(std::io::Error::other("clock skew"))
    }
}

#[tokio::test]
async fn a_sync_constructor_error_names_the_proto_too() {
    let e = App::builder().without_inventory().link::<FixedClock>().link::<Panicky>().build().await.unwrap_err();
    assert_eq!(e.to_string(), "construction of `config_sections::Panicky` (\"panicky\") failed: clock skew");
}

#[context_proto]
struct Tracer {
    id: AtomicUsize,
}

struct Session {
    db_url: String,
    tracer: Arc<Tracer>,
}

static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// A context proto with an async constructor taking a singleton and a context object.
#[context_proto]
impl Session {
    #[constructor]
    async fn open(db: Arc<Db>, tracer: Arc<Tracer>) -> Session {
        tokio::task::yield_now().await;
        tracer.id.store(SESSIONS.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
        Session { db_url: db.url.clone(), tracer }
    }
}

#[singleton_proto]
struct Handler {
    #[inject]
    session: AsyncContextRef<Session>,
}

#[tokio::test]
async fn context_protos_with_async_constructors_resolve_through_get_async() {
    let app = db_graph()
        .link::<Tracer>()
        .link::<Session>()
        .link::<Handler>()
        .config_value("db.url", "sqlite::memory:")
        .build()
        .await
        .unwrap();
    let handler = app.get_object::<Handler>().unwrap();
    let run = || {
        app.run_in_context(async {
            let a = handler.session.get_async().await.unwrap();
            let b = handler.session.get_async().await.unwrap();
            assert!(Arc::ptr_eq(&a, &b), "once per scope");
            // `get_object` has no async form (yet): it says so, built or not, whatever ran before.
            let e = app.get_object::<Session>().err().unwrap();
            assert!(matches!(e, DiError::AsyncInit { .. }), "{e}");
            (a.db_url.clone(), a.tracer.id.load(Ordering::SeqCst))
        })
    };
    let (url, first) = run().await;
    let (_, second) = run().await;
    assert_eq!(url, "sqlite::memory:");
    assert_ne!(first, second, "a new session per scope");
}

// ---- multi-instance -----------------------------------------------------------------------

#[config_proto(prefix = "redis", instances)]
#[derive(Debug, Deserialize)]
struct RedisConfig {
    url: String,
}

struct Redis {
    url: String,
}

#[singleton_proto(instances_of = RedisConfig)]
impl Redis {
    fn new(config: Arc<RedisConfig>) -> Redis {
        Redis { url: config.url.clone() }
    }
}

#[singleton_proto]
struct Caches {
    #[inject(name = "cache")]
    cache: Arc<Redis>,
    #[inject]
    all: Vec<Arc<Redis>>,
    #[inject]
    by_name: Keyed<Redis>,
}

#[singleton_proto]
struct WantsSessions {
    #[inject(name = "sessions")]
    _redis: Arc<Redis>,
}

fn redis_graph() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<RedisConfig>().link::<Redis>()
}

#[tokio::test]
async fn one_instance_per_config_table_injected_by_name_as_a_list_and_keyed() {
    let dir = folder("redis");
    let file = write(
        &dir,
        "app.toml",
        "[redis.cache]\nurl = \"redis://cache\"\n\n[redis.session]\nurl = \"redis://session\"\n",
    );
    let app = redis_graph().link::<Caches>().config_file(&file).build().await.unwrap();
    let caches = app.get_object::<Caches>().unwrap();
    assert_eq!(caches.cache.url, "redis://cache");
    assert_eq!(caches.all.iter().map(|r| r.url.as_str()).collect::<Vec<_>>(), ["redis://cache", "redis://session"]);
    assert_eq!(caches.by_name.get("session").unwrap().url, "redis://session");
    assert_eq!(
        caches.by_name.get("queue").err().unwrap().to_string(),
        "no instance of `config_sections::Redis` is named \"queue\"; the instances are: \"cache\", \"session\""
    );
    assert_eq!(app.get_object_named::<RedisConfig>("session").unwrap().url, "redis://session");
    assert!(Arc::ptr_eq(&caches.cache, &app.get_object_named::<Redis>("cache").unwrap()));
    assert!(app.to_mermaid().contains("cache"), "instances show in the graph export");

    let e = redis_graph().link::<WantsSessions>().config_file(&file).build().await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "`config_sections::WantsSessions (\"wantsSessions\")` injects `config_sections::Redis` named \"sessions\", but no provider has that name; the providers are: \"cache\", \"session\""
    );
}

/// Follows `Redis`, itself a template: expanded after it, whatever the registration order.
struct Pinger {
    redis: Arc<Redis>,
}

#[singleton_proto(instances_of = Redis)]
impl Pinger {
    fn new(redis: Arc<Redis>) -> Pinger {
        Pinger { redis }
    }
}

#[tokio::test]
async fn templates_of_templates_and_overrides_of_instances() {
    let two = |b: tegu_core::AppBuilder| {
        b.config_value("redis.cache.url", "redis://cache").config_value("redis.session.url", "redis://session")
    };
    // `Pinger` registered before `Redis` and `RedisConfig`.
    let app = two(App::builder().without_inventory().link::<Pinger>().link::<Redis>().link::<RedisConfig>())
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object_named::<Pinger>("session").unwrap().redis.url, "redis://session");
    assert_eq!(app.get_object_named::<Pinger>("cache").unwrap().redis.url, "redis://cache");

    // A fake of the section type replaces every instance, and keeps them.
    let app = two(redis_graph()).override_with(RedisConfig { url: "redis://fake".into() }).build().await.unwrap();
    assert_eq!(app.get_object_named::<Redis>("session").unwrap().url, "redis://fake");
    assert_eq!(app.get_object_named::<Redis>("cache").unwrap().url, "redis://fake");

    // A fake of one instance: that instance's table is not read (here it would fail).
    let app = redis_graph()
        .config_value("redis.cache.port", 1) // no url: reading it would be an error
        .config_value("redis.session.url", "redis://session")
        .override_named("cache", RedisConfig { url: "redis://fake".into() })
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object_named::<Redis>("cache").unwrap().url, "redis://fake");
    assert_eq!(app.get_object_named::<Redis>("session").unwrap().url, "redis://session");
}

trait Health: Send + Sync {}
struct DiskHealth;
impl Health for DiskHealth {}
struct NetHealth;
impl Health for NetHealth {}
struct Checks {
    _all: Keyed<dyn Health>,
}

#[tokio::test]
async fn keyed_refuses_two_providers_of_one_name() {
    let e = App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<DiskHealth>(|_| Ok(DiskHealth))
                .name("cache")
                .provides::<DiskHealth, dyn Health>(|h| h),
        )
        .register(
            ProtoDef::singleton::<NetHealth>(|_| Ok(NetHealth)).name("cache").provides::<NetHealth, dyn Health>(|h| h),
        )
        .register(
            ProtoDef::singleton::<Checks>(|r| Ok(Checks { _all: r.keyed(0)? }))
                .dep(tegu_core::registry::Dependency::new::<dyn Health>(tegu_core::registry::InjectKind::Keyed, None)),
        )
        .build()
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains(
            "which 2 protos provide (config_sections::DiskHealth (\"cache\"), config_sections::NetHealth (\"cache\"))"
        ),
        "{e}"
    );
}

#[tokio::test]
async fn a_template_without_instances_and_a_named_inactive_proto_say_so() {
    // No `[redis.*]` table: no `Redis`, and `Caches` says why.
    let e = redis_graph().link::<Caches>().build().await.err().unwrap().to_string();
    assert!(
        e.contains("injects `config_sections::Redis`, but every proto that provides it is left out: config_sections::Redis (\"redis\") (one instance per `config_sections::RedisConfig`, and there is none"),
        "{e}"
    );
    // The named provider is for another profile, while one of another name is active.
    let e = App::builder()
        .without_inventory()
        .link::<FakeMailer>()
        .link::<SmtpMailer>()
        .register(ProtoDef::singleton::<Pool<&'static str>>(|r| Ok(Pool(r.arc::<dyn Mailer>(0)?.kind()))).dep(
            tegu_core::registry::Dependency::new::<dyn Mailer>(tegu_core::registry::InjectKind::Arc, Some("mailer")),
        ))
        .register(
            ProtoDef::singleton::<FakeMailer>(|_| Ok(FakeMailer))
                .name("other")
                .provides::<FakeMailer, dyn Mailer>(|m| m),
        )
        .build()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("left out: config_sections::FakeMailer (\"mailer\") (registered for profile \"test\" only"),
        "{e}"
    );
}

#[tokio::test]
async fn an_instance_table_with_a_bad_value_names_its_key() {
    let e = redis_graph().config_value("redis.cache.url", 6379).build().await.err().unwrap().to_string();
    assert!(
        e.starts_with(
            "config key redis.cache.url of `config_sections::RedisConfig`: invalid type: expected a string, found an integer"
        ),
        "{e}"
    );
    let e = redis_graph().config_value("redis", 1).build().await.err().unwrap().to_string();
    assert!(e.starts_with("config key redis of `config_sections::RedisConfig`: expected a table of instances"), "{e}");
}

// ---- profiles, exclude, external ----------------------------------------------------------

trait Mailer: Send + Sync {
    fn kind(&self) -> &'static str;
}

#[singleton_proto(profile = "test", name = "mailer", provides(dyn Mailer))]
struct FakeMailer;
impl Mailer for FakeMailer {
    fn kind(&self) -> &'static str {
        "fake"
    }
}

#[singleton_proto(profile = "prod", name = "mailer", provides(dyn Mailer))]
struct SmtpMailer;
impl Mailer for SmtpMailer {
    fn kind(&self) -> &'static str {
        "smtp"
    }
}

#[singleton_proto]
struct Signup {
    #[inject]
    mailer: Arc<dyn Mailer>,
}

fn mail_graph() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<FakeMailer>().link::<SmtpMailer>().link::<Signup>()
}

#[tokio::test]
async fn a_profile_selects_the_protos_registered_for_it() {
    let app = mail_graph().profile("test").build().await.unwrap();
    assert_eq!(app.get_object::<Signup>().unwrap().mailer.kind(), "fake");
    assert!(app.get_object::<SmtpMailer>().is_err(), "the prod mailer is not registered");
    let app = mail_graph().profile("prod").build().await.unwrap();
    assert_eq!(app.get_object::<Signup>().unwrap().mailer.kind(), "smtp");

    let e = mail_graph().build().await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "`config_sections::Signup (\"signup\")` injects `dyn config_sections::Mailer`, but every proto that provides it is left out: config_sections::FakeMailer (\"mailer\") (registered for profile \"test\" only: activate it with `AppBuilder::profile(\"test\")`), config_sections::SmtpMailer (\"mailer\") (registered for profile \"prod\" only: activate it with `AppBuilder::profile(\"prod\")`)"
    );
}

#[tokio::test]
async fn exclude_drops_a_proto_and_says_so_when_it_was_needed() {
    let e = mail_graph().profile("test").exclude::<FakeMailer>().build().await.err().unwrap();
    assert!(
        e.to_string().contains(
            "left out: config_sections::FakeMailer (\"mailer\") (excluded by `AppBuilder::exclude`), config_sections::SmtpMailer (\"mailer\") (registered for profile \"prod\" only"
        ),
        "{e}"
    );
    let app = mail_graph().profile("test").exclude::<Signup>().build().await.unwrap();
    assert!(app.get_object::<Signup>().is_err());
    let e = mail_graph().profile("test").exclude::<Tracer>().build().await.err().unwrap();
    assert_eq!(e.to_string(), "cannot exclude `config_sections::Tracer`: no proto of that type is registered");
}

/// A generic type, registered by hand.
struct Pool<T>(T);

#[singleton_proto]
struct UsesPool {
    #[inject(external)]
    pool: Arc<Pool<u32>>,
}

#[tokio::test]
async fn a_hand_registered_generic_type_is_injected_by_concrete_type() {
    let app = App::builder()
        .without_inventory()
        .link::<UsesPool>()
        .register(ProtoDef::singleton::<Pool<u32>>(|_| Ok(Pool(8))))
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object::<UsesPool>().unwrap().pool.0, 8);
    let e = App::builder().without_inventory().link::<UsesPool>().build().await.err().unwrap();
    assert!(
        e.to_string().starts_with(
            "`config_sections::UsesPool (\"usesPool\")` injects `config_sections::Pool<u32>`, but no proto provides it"
        ),
        "{e}"
    );
}

#[tokio::test]
async fn a_hand_registered_config_section_works_like_an_annotated_one() {
    static SEEN: AtomicBool = AtomicBool::new(false);
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::config::<std::collections::BTreeMap<String, u64>>("limits").name("limits"))
        .register(
            ProtoDef::singleton::<Pool<u64>>(|r| {
                SEEN.store(r.config().contains("limits.upload"), Ordering::SeqCst);
                let limits = r.arc::<std::collections::BTreeMap<String, u64>>(0)?;
                Ok(Pool(limits["upload"]))
            })
            .dep(tegu_core::registry::Dependency::new::<std::collections::BTreeMap<String, u64>>(
                tegu_core::registry::InjectKind::Arc,
                None,
            )),
        )
        .config_value("limits.upload", 10)
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object::<Pool<u64>>().unwrap().0, 10);
    assert!(SEEN.load(Ordering::SeqCst), "a factory reads the configuration through its resolver");
}

// ---- secrets, case, lists, profiles --------------------------------------------------------

/// Credentials: no error about them may show them.
#[config_proto(prefix = "vault")]
#[derive(Debug, Deserialize)]
struct VaultConfig {
    password: String,
    #[serde(default)]
    endpoint: Option<Endpoint>,
}

/// A type whose own `Deserialize` error quotes the value it refused.
#[derive(Debug)]
struct Endpoint(String);

impl<'de> Deserialize<'de> for Endpoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.starts_with("https://") {
            Ok(Endpoint(text))
        } else {
            Err(serde::de::Error::custom(format!("{text} is not an https URL")))
        }
    }
}

const SECRET: &str = "postgres://app:S3cr3t@db/app";

#[tokio::test]
async fn no_configuration_error_shows_a_value() {
    if !in_child("no_configuration_error_shows_a_value", &[("SEC1_DB", SECRET), ("SEC1_VAULT__PASSWORD", "pw")]) {
        return;
    }
    // A string where a table belongs, from the environment.
    let e = db_app().config_env("SEC1_").config_known("vault").build().await.unwrap_err().to_string();
    assert_eq!(
        e,
        "config key db of `config_sections::DbConfig`: invalid type: expected struct DbConfig, found a string of 28 characters (from env SEC1_DB)"
    );
    // A number typed unquoted into a password.
    let dir = folder("secrets");
    let vault = || App::builder().without_inventory().link::<VaultConfig>();
    let file = write(&dir, "app.toml", "[vault]\npassword = 48151623\n");
    let e = vault().config_file(&file).build().await.unwrap_err().to_string();
    assert!(!e.contains("48151623"), "{e}");
    assert!(e.contains("invalid type: expected a string, found an integer"), "{e}");
    // A syntax error on the line of a secret: its place, not its text.
    let file = write(&dir, "broken.toml", "[vault]\npassword = \"S3cr3t\nendpoint = 1\n");
    let e = vault().config_file(&file).build().await.unwrap_err().to_string();
    assert!(!e.contains("S3cr3t"), "{e}");
    assert!(e.starts_with(&format!("file {}: line 2, column ", file.display())), "{e}");
    // A type's own error quoting the value.
    let file = write(&dir, "endpoint.toml", &format!("[vault]\npassword = \"pw\"\nendpoint = \"{SECRET}\"\n"));
    let e = vault().config_file(&file).build().await.unwrap_err().to_string();
    assert!(!e.contains("S3cr3t"), "{e}");
    assert!(e.contains("<a string of 28 characters> is not an https URL"), "{e}");
    // And read when right, the password from the environment.
    let file = write(&dir, "right.toml", "[vault]\npassword = \"file\"\nendpoint = \"https://vault\"\n");
    let app = vault().config_file(&file).config_env("SEC1_").build().await.unwrap();
    let config = app.get_object::<VaultConfig>().unwrap();
    assert_eq!(
        (config.password.as_str(), config.endpoint.as_ref().map(|e| e.0.as_str())),
        ("pw", Some("https://vault"))
    );
    // Out-of-range numbers in a file.
    let file = write(&dir, "huge.toml", "[db]\nurl = \"x\"\npool = 184467440737095516150\n");
    let e = db_app().config_file(&file).build().await.unwrap_err().to_string();
    assert!(!e.contains("184467440737095516150"), "{e}");
    assert!(e.contains("an integer out of the range of 64 bits"), "{e}");
    assert!(e.contains("db.pool"), "{e}");
}

/// A camelCase section: what `rename_all` makes of Rust's snake_case fields.
#[config_proto(prefix = "pool")]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolConfig {
    max_conn: u32,
    #[serde(default)]
    min_idle: u32,
    #[serde(default)]
    retry: Retry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Retry {
    #[serde(default)]
    back_off_ms: u64,
}

#[tokio::test]
async fn environment_keys_match_fields_whatever_their_case() {
    let vars = [("CASE1_POOL__MAXCONN", "50"), ("CASE1_POOL__MINIDLE", "3"), ("CASE1_POOL__RETRY__BACKOFFMS", "250")];
    if !in_child("environment_keys_match_fields_whatever_their_case", &vars) {
        return;
    }
    let dir = folder("case");
    let file = write(&dir, "app.toml", "[pool]\nmaxConn = 5\n");
    let app = App::builder()
        .without_inventory()
        .link::<PoolConfig>()
        .config_file(&file)
        .config_env("CASE1_")
        .build()
        .await
        .unwrap();
    let pool = app.get_object::<PoolConfig>().unwrap();
    // `maxConn` is in the file; `minIdle` and `retry.backOffMs` only in the type.
    assert_eq!((pool.max_conn, pool.min_idle, pool.retry.back_off_ms), (50, 3, 250));
    assert_eq!(app.config().origin("pool.maxConn").as_deref(), Some("env CASE1_POOL__MAXCONN"));
}

#[tokio::test]
async fn an_environment_variable_that_names_no_field_is_refused() {
    if !in_child("an_environment_variable_that_names_no_field_is_refused", &[("CASE2_POOL__MAXCONNS", "50")]) {
        return;
    }
    let e = App::builder()
        .without_inventory()
        .link::<PoolConfig>()
        .config_value("pool.maxConn", 5)
        .config_env("CASE2_")
        .build()
        .await
        .unwrap_err();
    assert!(matches!(&e, DiError::ConfigUnknownEnv { variable, .. } if variable == "CASE2_POOL__MAXCONNS"), "{e}");
    assert_eq!(
        e.to_string(),
        "environment variable CASE2_POOL__MAXCONNS sets config key pool.maxconns, but `config_sections::PoolConfig` has no such field (its fields there: maxConn, minIdle, retry); check the variable's name (keys match fields whatever their case)"
    );
}

#[config_proto(prefix = "net")]
#[derive(Debug, Deserialize)]
struct NetConfig {
    hosts: Vec<String>,
    #[serde(default)]
    ports: Vec<u16>,
}

#[tokio::test]
async fn lists_are_set_from_the_environment_item_by_item() {
    let vars = [
        ("LIST1_NET__HOSTS__1", "c"),
        ("LIST1_NET__HOSTS__2", "d"),
        ("LIST1_NET__PORTS__0", "80"),
        ("LIST1_NET__PORTS__1", "443"),
    ];
    if !in_child("lists_are_set_from_the_environment_item_by_item", &vars) {
        return;
    }
    let dir = folder("lists");
    let file = write(&dir, "app.toml", "[net]\nhosts = [\"a\", \"b\"]\n");
    let net = || App::builder().without_inventory().link::<NetConfig>().config_file(&file);
    let app = net().config_env("LIST1_").build().await.unwrap();
    let config = app.get_object::<NetConfig>().unwrap();
    // Item 1 replaced, item 2 appended; the ports, in no file, made a list of their own.
    assert_eq!(config.hosts, ["a", "c", "d"]);
    assert_eq!(config.ports, [80, 443]);
}

#[tokio::test]
async fn a_list_item_past_the_end_is_refused_naming_its_variable() {
    if !in_child("a_list_item_past_the_end_is_refused_naming_its_variable", &[("LIST2_NET__HOSTS__5", "z")]) {
        return;
    }
    let dir = folder("list-gap");
    let file = write(&dir, "app.toml", "[net]\nhosts = [\"a\", \"b\"]\n");
    let e = App::builder()
        .without_inventory()
        .link::<NetConfig>()
        .config_file(&file)
        .config_env("LIST2_")
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "env LIST2_*: LIST2_NET__HOSTS__5 sets item 5 of a list of 2 item(s): items are numbered from 0, and one is added at the end only"
    );
}

#[tokio::test]
async fn a_profile_name_that_reads_as_a_path_is_refused() {
    let dir = folder("profile-path");
    let file = write(&dir, "app.toml", "[db]\nurl = \"x\"\n");
    for profile in ["a/../../x", "", "prod.toml", "x y"] {
        let e = db_app().config_file(&file).profile(profile).build().await.unwrap_err();
        assert!(matches!(&e, DiError::InvalidProfile { profile: p } if p == profile), "{e}");
        assert!(e.to_string().starts_with(&format!("profile {profile:?} is not a profile name")), "{e}");
    }
    assert!(db_app().config_file(&file).profile("prod-eu_2").build().await.is_ok());
}

#[config_proto(prefix = "store")]
#[derive(Debug, Deserialize)]
struct StoreConfig {
    #[allow(dead_code)]
    url: String,
    #[serde(flatten)]
    pool: StorePool,
}

#[derive(Debug, Deserialize)]
struct StorePool {
    #[serde(default)]
    schema: Option<String>,
}

#[tokio::test]
async fn an_environment_variable_that_names_no_field_of_a_flattened_part_is_refused() {
    let vars = [("FLAT1_STORE__SCHEMA", "billing"), ("FLAT2_STORE__SCHEME", "billing")];
    if !in_child("an_environment_variable_that_names_no_field_of_a_flattened_part_is_refused", &vars) {
        return;
    }
    let build = |prefix| {
        App::builder().without_inventory().link::<StoreConfig>().config_value("store.url", "a").config_env(prefix)
    };
    // The variable the flattened part takes is read.
    let app = build("FLAT1_").build().await.unwrap();
    assert_eq!(app.get_object::<StoreConfig>().unwrap().pool.schema.as_deref(), Some("billing"));
    let e = build("FLAT2_").build().await.unwrap_err();
    assert!(matches!(&e, DiError::ConfigUnknownEnv { variable, .. } if variable == "FLAT2_STORE__SCHEME"), "{e}");
}

/// A variable of the nested shape under the App's prefix names a section: one that no proto
/// reads is refused with the section meant, as a file's key is; one without the separator is
/// the process's (a Kubernetes Service's `NOTES_SERVICE_HOST`), and `config_known` claims a
/// section something else reads.
#[tokio::test]
async fn a_variable_for_a_section_no_proto_reads_is_refused_naming_the_section_meant() {
    let vars = [("ENV1_POLL__MAXCONN", "50"), ("ENV1_SERVICE_HOST", "10.0.0.7")];
    if !in_child("a_variable_for_a_section_no_proto_reads_is_refused_naming_the_section_meant", &vars) {
        return;
    }
    let build =
        || App::builder().without_inventory().link::<PoolConfig>().config_value("pool.maxConn", 5).config_env("ENV1_");
    let e = build().build().await.unwrap_err();
    assert!(matches!(&e, DiError::ConfigUnknownKey { key, section: None, .. } if key == "poll.maxconn"), "{e}");
    assert_eq!(
        e.to_string(),
        "config key `poll.maxconn` (env ENV1_POLL__MAXCONN) is read by no config section; did you mean `pool.maxconn`?; fix its name or remove it; if code reads it with `App::config().get`, declare it: `AppBuilder::config_known(\"poll\")`, or `ProtoDef::reads_config::<T>(\"poll\")` for a factory that reads it"
    );
    // The remedy the message gives, for a section read by code.
    let app = build().config_known("poll").build().await.unwrap();
    assert_eq!(app.config().get::<String>("poll.maxconn").unwrap(), "50");
}
