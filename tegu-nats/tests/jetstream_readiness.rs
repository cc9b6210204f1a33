//! An instance's readiness (the outbox's check) says whether `JetStream` has subscribed: not
//! ready while the server will not create this instance's consumer, ready once it has.

mod support;

use std::time::Duration;

use async_nats::jetstream::{consumer, stream};
use support::Server;
use tegu_outbox::Outbox;
use tegu_outbox::testing::MemoryStore;
use tegu_test_support::until;

/// The stream takes one consumer, and another instance's holds it: this instance's
/// subscription fails (and is tried again every second) until that one is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_is_not_ready_until_its_consumer_is_subscribed() {
    let Some(server) = Server::new("readiness").await else { return };
    let stream = server
        .js
        .create_stream(stream::Config {
            name: server.stream.clone(),
            subjects: vec![format!("{}.>", server.subjects)],
            max_consumers: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let other = consumer::pull::Config { durable_name: Some("other".into()), ..Default::default() };
    stream.create_consumer(other).await.unwrap();

    let app = server
        .app("mine")
        .register(MemoryStore::new().proto())
        .register(Outbox::proto())
        .health_cache(Duration::ZERO)
        .build()
        .await
        .unwrap();
    // Two seconds: two tries at least, each refused.
    for _ in 0..20 {
        let report = app.health().await;
        assert!(!report.ready, "{report:?}");
        let outbox = report.checks.iter().find(|check| check.name == "outbox").expect("the outbox's check");
        let why = outbox.error.as_deref().unwrap_or_default();
        assert!(why.contains("not subscribed"), "{why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!server.has_consumer("mine").await);
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().subscriptions, 0);

    stream.delete_consumer("other").await.unwrap();
    until("the instance to be ready", Duration::from_secs(10), async || app.health().await.ready).await;
    assert!(server.has_consumer("mine").await);
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().subscriptions, 1);
    app.shutdown().await.unwrap();
}
