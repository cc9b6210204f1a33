//! `testing::MemoryBroker` behaves as the `Broker` trait says a broker does (one event per id,
//! every instance gets every event, a subscription made again resumes), and fails as told:
//! refused for good, passing failures, down, its state lost, receives and acknowledgements
//! that fail.

use std::time::Duration;

use tegu_core::error::BoxError;
use tegu_outbox::testing::MemoryBroker;
use tegu_outbox::{Broker, Outgoing, Received, Refused, Subscription};

fn event(id: &str) -> Outgoing<'_> {
    Outgoing { id, name: "parcels.shipped", payload: b"{}", headers: &[] }
}

/// The next event's id; panics if none comes within a second.
async fn next_id(subscription: &mut Box<dyn Subscription>) -> String {
    next(subscription).await.id
}

async fn next(subscription: &mut Box<dyn Subscription>) -> Received {
    let next = tokio::time::timeout(Duration::from_secs(1), subscription.next()).await;
    next.expect("an event within a second").expect("the subscription is open").expect("an event, not an error")
}

/// Whether nothing comes within 50 ms.
async fn quiet(subscription: &mut Box<dyn Subscription>) -> bool {
    tokio::time::timeout(Duration::from_millis(50), subscription.next()).await.is_err()
}

fn refused(result: Result<(), BoxError>) -> Option<String> {
    match result {
        Err(error) if error.is::<Refused>() => Some(error.to_string()),
        _ => None,
    }
}

#[tokio::test]
async fn every_instance_receives_each_id_once_in_the_order_published() {
    let a = MemoryBroker::new();
    let b = a.instance();
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    for id in ["e1", "e2", "e1"] {
        a.publish(event(id)).await.unwrap();
    }
    b.publish(event("e3")).await.unwrap();
    let ids: Vec<String> = a.published().into_iter().map(|p| p.id).collect();
    assert_eq!(ids, ["e1", "e2", "e3"]);
    for subscription in [&mut on_a, &mut on_b] {
        for id in ["e1", "e2", "e3"] {
            let received = next(subscription).await;
            assert_eq!(
                (received.id.as_str(), received.name.as_str(), &received.payload[..]),
                (id, "parcels.shipped", &b"{}"[..])
            );
            received.ack.ack().await.unwrap();
        }
        assert!(quiet(subscription).await, "an id stored once is delivered once");
    }
    assert_eq!((a.attempts(), a.duplicates(), a.subscriptions(), a.acknowledged()), (4, 1, 2, 6));
}

#[tokio::test]
async fn a_first_subscription_starts_with_what_is_published_from_then_on() {
    let broker = MemoryBroker::new();
    broker.publish(event("before")).await.unwrap();
    let mut subscription = broker.subscribe().await.unwrap();
    broker.publish(event("after")).await.unwrap();
    assert_eq!(next_id(&mut subscription).await, "after");
}

#[tokio::test]
async fn a_subscription_made_again_resumes_with_what_was_not_acknowledged() {
    let broker = MemoryBroker::new();
    let mut subscription = broker.subscribe().await.unwrap();
    for id in ["e1", "e2"] {
        broker.publish(event(id)).await.unwrap();
    }
    next(&mut subscription).await.ack.ack().await.unwrap();
    let unacknowledged = next(&mut subscription).await;
    assert_eq!(unacknowledged.id, "e2");
    drop(subscription);
    broker.publish(event("e3")).await.unwrap();
    let mut subscription = broker.subscribe().await.unwrap();
    assert_eq!(next_id(&mut subscription).await, "e2");
    assert_eq!(next_id(&mut subscription).await, "e3");
    assert!(quiet(&mut subscription).await);
}

#[tokio::test]
async fn refused_events_are_refused_for_good_and_stored_events_are_not() {
    let broker = MemoryBroker::new();
    broker.refuse("parcels.lost", "no such subject");
    broker.refuse_id("e2", "a poisoned event");
    broker.limit_payload(4);
    let lost = Outgoing { id: "e1", name: "parcels.lost", payload: b"{}", headers: &[] };
    assert_eq!(broker.refuses(lost), None, "a refused name is found out when published");
    assert_eq!(
        refused(broker.publish(lost).await).as_deref(),
        Some("the broker refuses the event for good: no such subject")
    );
    assert!(refused(broker.publish(event("e2")).await).is_some_and(|why| why.contains("a poisoned event")));
    let large = Outgoing { id: "e3", name: "parcels.shipped", payload: b"12345", headers: &[] };
    assert_eq!(broker.refuses(large).as_deref(), Some("5 bytes, more than the 4 this broker takes"));
    assert!(refused(broker.publish(large).await).is_some_and(|why| why.contains("more than the 4")));
    let fits = Outgoing { id: "e4", name: "parcels.shipped", payload: b"1234", headers: &[] };
    assert_eq!(broker.refuses(fits), None);
    broker.publish(fits).await.unwrap();
    let ids: Vec<String> = broker.published().into_iter().map(|p| p.id).collect();
    assert_eq!(ids, ["e4"]);
}

#[tokio::test]
async fn passing_failures_fail_the_publishes_they_are_told_to() {
    let broker = MemoryBroker::new();
    broker.fail_next(2);
    let mut outcomes = Vec::new();
    for id in ["a", "b", "c"] {
        outcomes.push(broker.publish(event(id)).await.map_err(|e| e.is::<Refused>()));
    }
    assert_eq!(outcomes, [Err(false), Err(false), Ok(())]);
    broker.fail_every(3);
    // Attempts 4 to 9: the 6th and the 9th fail.
    let mut outcomes = Vec::new();
    for id in ["d", "e", "f", "g", "h", "i"] {
        outcomes.push(broker.publish(event(id)).await.is_ok());
    }
    assert_eq!(outcomes, [true, true, false, true, true, false]);
    // A batch that fails halfway (the 11th attempt): how many it stored before, and the failure.
    broker.fail_every(11);
    let batch = [event("j"), event("k"), event("l")];
    let (done, result) = broker.publish_all(&batch).await;
    assert_eq!(done, 1);
    assert!(result.is_err_and(|e| !e.is::<Refused>()));
    assert_eq!(broker.attempts(), 11);
    assert_eq!(broker.published().len(), 6);
}

#[tokio::test]
async fn a_broker_that_is_down_fails_publishes_and_new_subscriptions_only() {
    let broker = MemoryBroker::new();
    let mut open = broker.subscribe().await.unwrap();
    broker.set_down(true);
    assert!(broker.subscribe().await.is_err());
    assert!(broker.publish(event("e1")).await.is_err_and(|e| !e.is::<Refused>()));
    assert!(broker.published().is_empty());
    broker.set_down(false);
    broker.publish(event("e1")).await.unwrap();
    assert_eq!(next_id(&mut open).await, "e1", "the open subscription stayed open");
    assert_eq!(broker.subscriptions(), 1);
}

#[tokio::test]
async fn a_broker_that_forgets_ends_subscriptions_and_stores_an_id_again() {
    let a = MemoryBroker::new();
    let b = a.instance();
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    a.publish(event("e1")).await.unwrap();
    assert_eq!(next_id(&mut on_a).await, "e1");
    // B had not received it: lost with the store.
    a.forget();
    assert!(on_a.next().await.is_none());
    assert!(on_b.next().await.is_none());
    assert!(a.published().is_empty());
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    a.publish(event("e1")).await.unwrap();
    assert_eq!(a.published().len(), 1, "the id is stored again");
    assert_eq!(next_id(&mut on_a).await, "e1");
    assert_eq!(next_id(&mut on_b).await, "e1");
    assert!(quiet(&mut on_b).await);
}

/// As tegu-nats makes a lost consumer again, starting before the instance last heard from the
/// old one: after the broker forgot, an instance that had a consumer gets what was published
/// since, even before it subscribed again; one subscribing for the first time only what comes
/// after.
#[tokio::test]
async fn a_consumer_made_again_after_the_broker_forgot_gets_what_was_published_since() {
    let a = MemoryBroker::new();
    let b = a.instance();
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    a.forget();
    assert!(on_a.next().await.is_none() && on_b.next().await.is_none());
    // A subscribes again and republishes before B does.
    let mut on_a = a.subscribe().await.unwrap();
    a.publish(event("e1")).await.unwrap();
    assert_eq!(next_id(&mut on_a).await, "e1");
    let mut on_b = b.subscribe().await.unwrap();
    assert_eq!(next_id(&mut on_b).await, "e1", "B's consumer made again starts with what came after the restart");
    assert!(quiet(&mut on_b).await);
    // A third instance, whose first subscription it is: what is published from then on.
    let c = a.instance();
    let mut on_c = c.subscribe().await.unwrap();
    assert!(quiet(&mut on_c).await);
    a.publish(event("e2")).await.unwrap();
    assert_eq!(next_id(&mut on_c).await, "e2");
}

#[tokio::test]
async fn failed_receives_and_acknowledgements_lose_nothing_and_redeliver_brings_an_event_again() {
    let broker = MemoryBroker::new();
    let mut subscription = broker.subscribe().await.unwrap();
    broker.publish(event("e1")).await.unwrap();
    broker.fail_receives(1);
    let failed = tokio::time::timeout(Duration::from_secs(1), subscription.next()).await.unwrap();
    assert!(matches!(failed, Some(Err(_))));
    let received = next(&mut subscription).await;
    assert_eq!(received.id, "e1");
    broker.fail_acks(1);
    assert!(received.ack.ack().await.is_err());
    let again = next(&mut subscription).await;
    assert_eq!(again.id, "e1", "not acknowledged: delivered again");
    again.ack.ack().await.unwrap();
    assert!(quiet(&mut subscription).await);
    assert!(broker.redeliver("e1"));
    assert!(!broker.redeliver("e9"));
    assert_eq!(next_id(&mut subscription).await, "e1");
    assert_eq!(broker.acknowledged(), 1);
}

/// An event's headers come with every delivery of it: to every instance, again after a failed
/// acknowledgement, and when redelivered.
#[tokio::test]
async fn headers_come_with_every_delivery() {
    let a = MemoryBroker::new();
    let b = a.instance();
    let (mut on_a, mut on_b) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let headers = [("tegu-tenant".to_owned(), "acme".to_owned()), ("x-request-id".to_owned(), "r-1".to_owned())];
    a.publish(Outgoing { id: "e1", name: "parcels.shipped", payload: b"{}", headers: &headers }).await.unwrap();
    assert_eq!(a.published()[0].headers, headers);
    assert_eq!(next(&mut on_b).await.headers, headers);
    a.fail_acks(1);
    assert!(next(&mut on_a).await.ack.ack().await.is_err());
    let again = next(&mut on_a).await;
    assert_eq!((again.id.as_str(), &again.headers[..]), ("e1", &headers[..]), "delivered again");
    again.ack.ack().await.unwrap();
    assert!(a.redeliver("e1"));
    assert_eq!(next(&mut on_a).await.headers, headers, "redelivered");
}
