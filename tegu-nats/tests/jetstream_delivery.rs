//! What `JetStream` publishes and what a subscription brings, on a real NATS server: an event
//! reaches the subscription once, with its id, name and JSON, sent as `Nats-Msg-Id` on the
//! subject `{subjects}.{name}`; an id published again is stored once; a message published by
//! something else comes without an id.

mod support;

use std::time::Duration;

use support::{Server, next, quiet};
use tegu_outbox::{Broker, Outgoing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_event_reaches_the_subscription_once_with_its_id_name_and_payload() {
    let Some(server) = Server::new("delivery").await else { return };
    let (app, broker) = server.broker("delivery").await;
    let mut subscription = broker.subscribe().await.unwrap();
    let event = Outgoing {
        id: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        name: "todos.completed",
        payload: br#"{"id":1}"#,
        headers: &[],
    };
    broker.publish(event).await.unwrap();

    // On the server: the subject, and the id as `Nats-Msg-Id`.
    let stream = server.js.get_stream(&server.stream).await.unwrap();
    let subject = format!("{}.todos.completed", server.subjects);
    let stored = stream.get_last_raw_message_by_subject(&subject).await.unwrap();
    let id = stored.headers.get(async_nats::header::NATS_MESSAGE_ID).map(|id| id.as_str().to_owned());
    assert_eq!(id.as_deref(), Some(event.id));
    assert_eq!(&stored.payload[..], event.payload);

    let received = next(&mut subscription).await;
    assert_eq!(
        (received.id.as_str(), received.name.as_str(), &received.payload[..]),
        (event.id, "todos.completed", event.payload)
    );
    received.ack.ack().await.unwrap();
    assert!(quiet(&mut subscription, Duration::from_secs(1)).await, "delivered once");
    // Acknowledged: a subscription made again (the consumer resumed) does not bring it back.
    drop(subscription);
    let mut again = broker.subscribe().await.unwrap();
    assert!(quiet(&mut again, Duration::from_secs(1)).await, "acknowledged, not redelivered");
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_published_again_is_stored_and_delivered_once() {
    let Some(server) = Server::new("dedup").await else { return };
    let (app, broker) = server.broker("dedup").await;
    let mut subscription = broker.subscribe().await.unwrap();
    let event = |id| Outgoing { id, name: "parcels.shipped", payload: b"{}", headers: &[] };
    // A second relay of the same row, alone and in a batch.
    broker.publish(event("id-1")).await.unwrap();
    broker.publish(event("id-1")).await.unwrap();
    let (done, result) = broker.publish_all(&[event("id-2"), event("id-1"), event("id-3"), event("id-2")]).await;
    assert_eq!(done, 4);
    result.unwrap();
    let info = server.stream_info().await.expect("the stream");
    assert_eq!(info.state.messages, 3, "one message per id");
    for id in ["id-1", "id-2", "id-3"] {
        let received = next(&mut subscription).await;
        assert_eq!(received.id, id);
        received.ack.ack().await.unwrap();
    }
    assert!(quiet(&mut subscription, Duration::from_secs(1)).await, "each id delivered once");
    app.shutdown().await.unwrap();
}

/// Something other than an outbox publishing on the stream's subjects: no `Nats-Msg-Id`, so
/// the event has no id (the outbox cannot recognise it again, and hands it over each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_published_without_an_id_comes_without_one() {
    let Some(server) = Server::new("no_id").await else { return };
    let (app, broker) = server.broker("no_id").await;
    let mut subscription = broker.subscribe().await.unwrap();
    let subject = format!("{}.billing.paid", server.subjects);
    server.js.publish(subject, "{}".into()).await.unwrap().await.unwrap();
    let received = next(&mut subscription).await;
    assert_eq!((received.id.as_str(), received.name.as_str()), ("", "billing.paid"));
    app.shutdown().await.unwrap();
}

/// Two instances, each with a consumer of its own: each receives every event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_receives_every_event() {
    let Some(server) = Server::new("instances").await else { return };
    let (a_app, a) = server.broker("a").await;
    let (b_app, b) = server.broker("b").await;
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    for id in ["e1", "e2"] {
        a.publish(Outgoing { id, name: "parcels.shipped", payload: b"{}", headers: &[] }).await.unwrap();
    }
    for subscription in [&mut on_a, &mut on_b] {
        for id in ["e1", "e2"] {
            let received = next(subscription).await;
            assert_eq!(received.id, id);
            received.ack.ack().await.unwrap();
        }
    }
    assert!(server.has_consumer("a").await && server.has_consumer("b").await);
    a_app.shutdown().await.unwrap();
    b_app.shutdown().await.unwrap();
}
