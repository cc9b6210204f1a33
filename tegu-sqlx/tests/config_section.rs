//! The `[database]` section read by a `Database` the App does not build: the error names the
//! proto and how to have it, not a declaration that would hide it. A binary of its own, with
//! no proto of its own: the App holds what the linked crates register.

use tegu_core::App;
use tegu_sqlx::{Database, Sqlite};

#[tokio::test]
async fn a_database_section_without_the_database_names_it_and_linking_it_builds() {
    let refused = App::builder().config_value("database.url", "sqlite::memory:").build().await;
    let message = refused.map(drop).unwrap_err().to_string();
    assert!(message.contains("`[database]` is read by tegu-sqlx's `Database`"), "{message}");
    assert!(!message.contains("config_known"), "no declaration that would hide the missing proto: {message}");
    // The remedy the message gives.
    let app = App::builder()
        .link::<Database<Sqlite>>()
        .config_value("database.url", "sqlite::memory:")
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_object::<Database<Sqlite>>().unwrap().name(), "database");
}
