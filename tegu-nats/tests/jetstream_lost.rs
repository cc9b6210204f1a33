//! The server forgets: the stream deleted (as by a server restarted without its store) takes
//! the consumer with it. A publish then fails, a failure that passes (the relay tries again),
//! and creates the stream again; the subscription ends, and one made again creates the
//! consumer and brings what is published from then on. The same when the server comes back
//! without its store while nothing is published.

mod support;

use std::time::Duration;

use support::{Server, next};
use tegu_core::App;
use tegu_nats::JetStream;
use tegu_outbox::{Broker, Outgoing, Refused};
use tegu_test_support::servers::Own;
use tegu_test_support::until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_deleted_is_created_again_with_the_consumer() {
    let Some(server) = Server::new("lost").await else { return };
    let (app, broker) = server.broker("lost").await;
    let event = |id| Outgoing { id, name: "parcels.shipped", payload: b"{}", headers: &[] };
    let mut subscription = broker.subscribe().await.unwrap();
    broker.publish(event("e1")).await.unwrap();
    next(&mut subscription).await.ack.ack().await.unwrap();

    // The subscription waits for its next event while the server forgets.
    let waiting = tokio::spawn(async move {
        let next = tokio::time::timeout(Duration::from_secs(30), subscription.next()).await;
        next.map(|next| next.map(|received| received.map(|r| r.id)))
    });
    server.js.delete_stream(&server.stream).await.unwrap();
    assert!(server.stream_info().await.is_none());
    let error = broker.publish(event("e2")).await.expect_err("no stream to store it");
    assert!(!error.is::<Refused>(), "a failure that passes, not a refusal: {error}");
    until("the stream to be created again", Duration::from_secs(10), async || server.stream_info().await.is_some())
        .await;
    let ended = waiting.await.unwrap();
    assert!(matches!(ended, Ok(None)), "the subscription ends: {ended:?}");
    assert!(!server.has_consumer("lost").await, "the consumer went with the stream");

    let mut subscription = broker.subscribe().await.unwrap();
    assert!(server.has_consumer("lost").await, "created again");
    broker.publish(event("e3")).await.unwrap();
    let received = next(&mut subscription).await;
    assert_eq!(received.id, "e3");
    received.ack.ack().await.unwrap();
    assert_eq!(server.stream_info().await.expect("the stream").state.messages, 1, "e2 was not stored");
    app.shutdown().await.unwrap();
}

/// A NATS server of this test's own comes back without its store while the subscription is
/// idle (nothing published): the missed heartbeats tell it, it asks the server for its
/// consumer, and ends; a subscription made again creates the stream and the consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_subscription_ends_when_the_server_comes_back_without_its_store() {
    let Ok(mut nats) = Own::nats("forgets") else { return };
    let app = App::builder()
        .register(JetStream::proto())
        .config_value("nats.url", nats.url())
        .config_value("nats.consumer", "idle")
        .build()
        .await
        .unwrap();
    let broker = app.get_object::<JetStream>().unwrap();
    let event = |id| Outgoing { id, name: "parcels.shipped", payload: b"{}", headers: &[] };
    let mut subscription = broker.subscribe().await.unwrap();
    broker.publish(event("e1")).await.unwrap();
    next(&mut subscription).await.ack.ack().await.unwrap();

    nats.lose_store();
    nats.start().unwrap();
    // Two heartbeats of 5 s missed, then the question: well within 30 s.
    let ended = tokio::time::timeout(Duration::from_secs(30), subscription.next()).await;
    assert!(matches!(ended, Ok(None)), "the subscription ends: {:?}", ended.map(|n| n.map(|r| r.map(|r| r.id))));

    let mut subscription = broker.subscribe().await.unwrap();
    broker.publish(event("e2")).await.unwrap();
    assert_eq!(next(&mut subscription).await.id, "e2");
    app.shutdown().await.unwrap();
}
