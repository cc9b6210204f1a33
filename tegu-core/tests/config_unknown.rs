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
    let DiError::ConfigUnknownKey { key, source_name, section, near } = &error else { panic!("{error}") };
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
    let DiError::ConfigUnknownKey { key, source_name, section, near } = &error else { panic!("{message}") };
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
