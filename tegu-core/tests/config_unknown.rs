//! A key set in a file or with `config_value` that nothing reads is refused at `build()` and by
//! `check()`, naming the key, where it was set and the known key it was probably meant as: a
//! misspelled optional key no longer leaves its default silently in place.

use std::path::PathBuf;

use serde::Deserialize;
use tegu_core::{App, AppBuilder, DiError, ProtoDef, config_proto};

#[config_proto(prefix = "database")]
#[derive(Debug, Deserialize)]
struct DatabaseConfig {
    #[allow(dead_code)]
    url: String,
    #[serde(default)]
    max_connections: Option<u32>,
}

fn app() -> AppBuilder {
    App::builder().without_inventory().link::<DatabaseConfig>()
}

fn file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tegu-config-unknown-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_misspelled_key_in_a_file_is_refused_with_its_line_and_the_field_it_meant() {
    let path = file("file", "[database]\nurl = \"sqlite::memory:\"\nmax_conections = 1\n");
    let error = app().config_file(&path).build().await.err().unwrap();
    let DiError::ConfigUnknownKey { key, source_name, section, near, .. } = &error else { panic!("{error}") };
    assert_eq!(key, "database.max_conections");
    assert_eq!(source_name, &format!("file {}, line 3", path.display()));
    assert_eq!(*section, Some(std::any::type_name::<DatabaseConfig>()));
    assert_eq!(near, &["database.max_connections"]);
    let message = error.to_string();
    assert!(message.contains("did you mean `database.max_connections`?"), "{message}");
    // `check()` says the same, without building anything.
    assert_eq!(app().config_file(&path).check().unwrap_err().to_string(), message);
    // Spelled right, it builds and the value is read.
    let right = file("right", "[database]\nurl = \"sqlite::memory:\"\nmax_connections = 1\n");
    let app = app().config_file(&right).build().await.unwrap();
    assert_eq!(app.get_object::<DatabaseConfig>().unwrap().max_connections, Some(1));
}

#[tokio::test]
async fn a_misspelled_section_in_config_value_is_refused_with_the_call_and_the_section_it_meant() {
    let error = app().config_value("database.url", "a").config_value("databse.max_connections", 2).check().unwrap_err();
    let message = error.to_string();
    let DiError::ConfigUnknownKey { key, source_name, section, near, .. } = &error else { panic!("{message}") };
    assert_eq!((key.as_str(), *section), ("databse.max_connections", None));
    assert!(
        source_name.starts_with("config_value(\"databse.max_connections\") at tegu-core/tests/config_unknown.rs:"),
        "{source_name}"
    );
    assert_eq!(near, &["database.max_connections"]);
    assert!(message.contains("`AppBuilder::config_known(\"databse\")`"), "{message}");
}

#[tokio::test]
async fn keys_read_by_code_are_declared_with_config_known_or_reads_config() {
    let undeclared = app().config_value("database.url", "a").config_value("features.beta", true).build().await;
    assert!(matches!(undeclared.err(), Some(DiError::ConfigUnknownKey { .. })));

    let app = app().config_known("features").config_value("database.url", "a").config_value("features.beta", true);
    let app = app.build().await.unwrap();
    assert!(app.config().get::<bool>("features.beta").unwrap());

    // A factory's own section: declared on its `ProtoDef`, and its keys checked like a section's.
    #[derive(Deserialize)]
    struct Smtp {
        host: String,
    }
    struct Mailer(String);
    let mailer = || {
        ProtoDef::singleton::<Mailer>(|r| Ok(Mailer(r.config().get::<Smtp>("smtp")?.host))).reads_config::<Smtp>("smtp")
    };
    let built = App::builder().without_inventory().register(mailer()).config_value("smtp.host", "mx").build().await;
    assert_eq!(built.unwrap().get_object::<Mailer>().unwrap().0, "mx");
    let error = App::builder()
        .without_inventory()
        .register(mailer())
        .config_value(
            "smtp",
            [("host", "mx"), ("hots", "mx2")].into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        )
        .check()
        .unwrap_err();
    assert!(
        matches!(&error, DiError::ConfigUnknownKey { key, near, .. } if key == "smtp.hots" && near == &["smtp.host"]),
        "{error}"
    );
}

#[tokio::test]
async fn a_key_under_an_overridden_or_inactive_section_is_not_unknown() {
    // Another profile's section: its keys sit in the shared file.
    #[config_proto(prefix = "cache", profile = "prod")]
    #[derive(Debug, Deserialize)]
    struct CacheConfig {
        #[allow(dead_code)]
        size: u32,
    }
    let app = App::builder()
        .without_inventory()
        .link::<DatabaseConfig>()
        .link::<CacheConfig>()
        .profile("test")
        .config_value("database.url", "a")
        .config_value("cache.size", 1)
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}

// ---- keys that are read, however the sections share their tables ------------------------

#[config_proto(prefix = "server")]
#[derive(Debug, Deserialize)]
struct ServerConfig {
    #[allow(dead_code)]
    port: u16,
}

/// A section inside another's table.
#[config_proto(prefix = "server.tls")]
#[derive(Debug, Deserialize)]
struct TlsConfig {
    #[allow(dead_code)]
    cert: String,
}

/// A second type reading another field of `server`'s table.
#[config_proto(prefix = "server")]
#[derive(Debug, Deserialize)]
struct ServerLimits {
    #[serde(default)]
    #[allow(dead_code)]
    max_body: Option<u32>,
}

#[tokio::test]
async fn a_key_that_any_section_takes_is_read_nested_or_shared() {
    let path = file("shared", "[server]\nport = 80\nmax_body = 10\n\n[server.tls]\ncert = \"c\"\n");
    let app = App::builder()
        .without_inventory()
        .link::<ServerConfig>()
        .link::<TlsConfig>()
        .link::<ServerLimits>()
        .config_file(&path);
    assert!(app.check().is_ok());
    // A typo is still refused, as the innermost section's.
    let typo = file("shared-typo", "[server]\nport = 80\n\n[server.tls]\ncert = \"c\"\ncrt = \"d\"\n");
    let error = App::builder()
        .without_inventory()
        .link::<ServerConfig>()
        .link::<TlsConfig>()
        .link::<ServerLimits>()
        .config_file(&typo)
        .check()
        .unwrap_err();
    assert!(
        matches!(&error, DiError::ConfigUnknownKey { key, section: Some(s), .. } if key == "server.tls.crt" && s.ends_with("TlsConfig")),
        "{error}"
    );
}

#[config_proto(prefix = "cache", profile = "dev")]
#[derive(Debug, Deserialize)]
struct DevCache {
    #[allow(dead_code)]
    size: u32,
}

#[config_proto(prefix = "cache", profile = "prod")]
#[derive(Debug, Deserialize)]
struct ProdCache {
    #[allow(dead_code)]
    size: u32,
    #[allow(dead_code)]
    ttl: u32,
}

#[tokio::test]
async fn a_key_of_another_profiles_section_at_the_same_prefix_is_not_unknown() {
    let app = App::builder()
        .without_inventory()
        .link::<DevCache>()
        .link::<ProdCache>()
        .profile("dev")
        .config_value("cache.size", 1)
        .config_value("cache.ttl", 60);
    assert!(app.check().is_ok());
}

#[tokio::test]
async fn a_retired_key_ignored_on_purpose_and_a_reader_of_anything_are_not_refused() {
    #[derive(Deserialize)]
    struct Smtp {
        #[allow(dead_code)]
        host: String,
        /// A key that older deployments still set.
        #[allow(dead_code)]
        #[serde(default)]
        port_v1: Option<serde::de::IgnoredAny>,
    }
    struct Mailer;
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Mailer>(|_| Ok(Mailer)).reads_config::<Smtp>("smtp"))
        .register(ProtoDef::singleton::<String>(|_| Ok(String::new())).reads_config::<serde::de::IgnoredAny>("legacy"))
        .config_value("smtp.host", "mx")
        .config_value("smtp.port_v1", 25)
        .config_value("legacy.anything", true);
    assert!(app.check().is_ok());
}

#[tokio::test]
async fn a_misspelled_key_in_an_array_of_tables_is_refused() {
    #[derive(Deserialize)]
    struct Jobs {
        #[allow(dead_code)]
        jobs: Vec<Job>,
    }
    #[derive(Deserialize)]
    struct Job {
        #[allow(dead_code)]
        name: String,
    }
    struct Runner;
    let path = file("jobs", "[batch]\n[[batch.jobs]]\nname = \"a\"\n[[batch.jobs]]\nnmae = \"b\"\n");
    let error = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Runner>(|_| Ok(Runner)).reads_config::<Jobs>("batch"))
        .config_file(&path)
        .check()
        .unwrap_err();
    // The second job lacks `name` too: that is the factory's error at build; here, the typo.
    assert!(
        matches!(&error, DiError::ConfigUnknownKey { key, near, .. } if key == "batch.jobs.1.nmae" && near == &["batch.jobs.1.name"]),
        "{error}"
    );
}

#[config_proto(prefix = "queues", instances)]
#[derive(Debug, Deserialize)]
struct QueueConfig {
    #[allow(dead_code)]
    url: String,
}

#[tokio::test]
async fn a_misspelled_key_of_an_instance_is_refused_as_its_sections() {
    let error = App::builder()
        .without_inventory()
        .link::<QueueConfig>()
        .config_value("queues.orders.url", "a")
        .config_value("queues.mail.url", "b")
        .config_value("queues.mail.ulr", "c")
        .check()
        .unwrap_err();
    assert!(
        matches!(&error, DiError::ConfigUnknownKey { key, near, .. } if key == "queues.mail.ulr" && near == &["queues.mail.url"]),
        "{error}"
    );
}

/// A section whose struct flattens another: serde hands the flattened part every key the
/// outer struct does not take, so none is ignored as serde sees it; the check asks the type
/// whether it takes each key.
#[config_proto(prefix = "http")]
#[derive(Debug, Deserialize)]
struct HttpConfig {
    addr: String,
    #[serde(flatten)]
    limits: Limits,
}

#[derive(Debug, Deserialize)]
struct Limits {
    #[serde(default)]
    max_body: Option<u64>,
    #[serde(default)]
    timeouts: Timeouts,
}

#[derive(Debug, Default, Deserialize)]
struct Timeouts {
    #[serde(default)]
    read_ms: Option<u64>,
}

fn http_app() -> AppBuilder {
    App::builder().without_inventory().link::<HttpConfig>()
}

#[tokio::test]
async fn a_misspelled_key_of_a_flattened_part_is_refused() {
    let path = file("flatten", "[http]\naddr = \"127.0.0.1:80\"\nmax_bdy = 1024\n");
    let error = http_app().config_file(&path).build().await.expect_err("the typo refused");
    let DiError::ConfigUnknownKey { key, source_name, section, .. } = &error else { panic!("{error}") };
    assert_eq!(key, "http.max_bdy");
    assert_eq!(source_name, &format!("file {}, line 3", path.display()));
    assert_eq!(*section, Some(std::any::type_name::<HttpConfig>()));
    assert_eq!(http_app().config_file(&path).check().unwrap_err().to_string(), error.to_string());

    // In a table of the flattened part, and at the outer struct's level, with `config_value`.
    let nested = http_app().config_value("http.addr", "a").config_value("http.timeouts.red_ms", 5).check();
    assert!(
        matches!(&nested, Err(DiError::ConfigUnknownKey { key, .. }) if key == "http.timeouts.red_ms"),
        "{nested:?}"
    );
    let outer = http_app().config_value("http.addr", "a").config_value("http.adr", "b").check();
    assert!(matches!(&outer, Err(DiError::ConfigUnknownKey { key, .. }) if key == "http.adr"), "{outer:?}");

    // Every key spelled right, of the outer struct and of the flattened part, builds.
    let right = file("flatten-right", "[http]\naddr = \"a\"\nmax_body = 1024\n[http.timeouts]\nread_ms = 5\n");
    let app = http_app().config_file(&right).build().await.unwrap();
    let http = app.get_object::<HttpConfig>().unwrap();
    assert_eq!((http.addr.as_str(), http.limits.max_body, http.limits.timeouts.read_ms), ("a", Some(1024), Some(5)));
}

#[tokio::test]
async fn a_flattened_map_takes_every_other_key() {
    #[derive(Deserialize)]
    struct Labels {
        #[allow(dead_code)]
        service: String,
        #[allow(dead_code)]
        #[serde(flatten)]
        rest: std::collections::HashMap<String, String>,
    }
    struct Tagger;
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Tagger>(|_| Ok(Tagger)).reads_config::<Labels>("labels"))
        .config_value("labels.service", "api")
        .config_value("labels.team", "core")
        .config_value("labels.tier", "1");
    assert!(app.check().is_ok());
}
