//! An external event's name is checked when the App is built: one that is no valid name fails
//! `build()`, naming the type.

use tegu_core::App;
use tegu_outbox::Outbox;
use tegu_outbox::testing::{MemoryBroker, MemoryStore};

/// Named with a space.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Badly;

tegu_outbox::external_event!(Badly = "badly named");

#[tokio::test]
async fn a_bad_name_fails_the_build_naming_the_type() {
    let error = App::builder()
        .register(MemoryStore::new().proto())
        .register(MemoryBroker::new().proto())
        .register(Outbox::proto())
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("names::Badly") && error.contains("\"badly named\""), "{error}");
}
