//! Shared subscriptions on a real NATS server: the instances subscribed with one group share
//! its events, each to one of them; one an instance took and did not acknowledge (it died)
//! goes to another once `nats.ack_wait_ms` has passed, and not before while the instance says
//! it is still working on it; an event given back (`nak`) comes again; a consumer made with
//! another `ack_wait` is updated.

mod support;

use std::time::Duration;

use support::{Server, next, quiet};
use tegu_outbox::{Broker, Outgoing};

const GROUP: &str = "shop::Mailer::on_shipped";

fn shipped(id: &str) -> Outgoing<'_> {
    Outgoing { id, name: "shop.shipped", payload: b"{}", headers: &[] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_goes_to_one_instance_and_an_unacknowledged_one_to_the_other_after_ack_wait() {
    let Some(server) = Server::new("shared").await else { return };
    let app = |consumer: &str| server.app(consumer).config_value("nats.ack_wait_ms", 1000);
    let (a_app, b_app) = (app("a").build().await.unwrap(), app("b").build().await.unwrap());
    let a = a_app.get_object::<tegu_nats::JetStream>().unwrap();
    let b = b_app.get_object::<tegu_nats::JetStream>().unwrap();
    assert_eq!(a.progress_every(), Some(Duration::from_millis(1000) / 3));
    let mut on_a = a.subscribe_shared(GROUP, "shop.shipped").await.unwrap();
    let mut on_b = b.subscribe_shared(GROUP, "shop.shipped").await.unwrap();
    // Events of another name do not reach the group.
    a.publish(Outgoing { id: "other", name: "shop.paid", payload: b"{}", headers: &[] }).await.unwrap();
    a.publish(shipped("e1")).await.unwrap();
    // A takes it, keeps it alive past ack_wait by telling the server it is working on it,
    // then dies without acknowledging.
    let held = next(&mut on_a).await;
    assert_eq!(held.id, "e1");
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.ack.progress().await.unwrap();
    }
    assert!(quiet(&mut on_b, Duration::from_millis(300)).await, "not taken over while A works on it");
    drop(held);
    drop(on_a);
    // B gets it once ack_wait has passed.
    let taken_over = next(&mut on_b).await;
    assert_eq!(taken_over.id, "e1");
    taken_over.ack.ack().await.unwrap();
    // Given back: it comes again.
    b.publish(shipped("e2")).await.unwrap();
    let given_back = next(&mut on_b).await;
    assert_eq!(given_back.id, "e2");
    given_back.ack.nak(Duration::from_millis(100)).await.unwrap();
    let again = next(&mut on_b).await;
    assert_eq!(again.id, "e2");
    again.ack.ack().await.unwrap();
    assert!(quiet(&mut on_b, Duration::from_millis(500)).await, "nothing else");
    a_app.shutdown().await.unwrap();
    b_app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_consumer_made_with_another_ack_wait_is_updated() {
    let Some(server) = Server::new("shared_update").await else { return };
    let first = server.app("a").config_value("nats.ack_wait_ms", 1000).build().await.unwrap();
    let broker = first.get_object::<tegu_nats::JetStream>().unwrap();
    drop(broker.subscribe_shared(GROUP, "shop.shipped").await.unwrap());
    first.shutdown().await.unwrap();
    let second = server.app("a").config_value("nats.ack_wait_ms", 5000).build().await.unwrap();
    let broker = second.get_object::<tegu_nats::JetStream>().unwrap();
    let mut subscription = broker.subscribe_shared(GROUP, "shop.shipped").await.unwrap();
    let stream = server.js.get_stream(&server.stream).await.unwrap();
    let mut names = stream.consumer_names();
    let mut found = None;
    use futures_util::StreamExt;
    while let Some(Ok(name)) = names.next().await {
        if name.starts_with("cluster-") {
            found = Some(name);
        }
    }
    let name = found.expect("the shared consumer");
    let info = stream.consumer_info(&name).await.unwrap();
    assert_eq!(info.config.ack_wait, Duration::from_secs(5));
    broker.publish(shipped("e1")).await.unwrap();
    assert_eq!(next(&mut subscription).await.id, "e1");
    second.shutdown().await.unwrap();
}
