//! `JetStream` against a real NATS server (`tegu_test_support::servers::nats`): what it says it
//! would refuse is exactly what the server refuses, and a refusal is told apart from a failure
//! that passes.

mod support;

use std::time::Duration;

use support::Server;
use tegu_core::App;
use tegu_nats::JetStream;
use tegu_outbox::{Broker, Outgoing, Refused};

/// The server's `max_payload` (1 MiB by default) counts the headers too: an event whose payload
/// and headers (`Nats-Msg-Id`, and its own) fill it exactly is taken; one byte more is refused, before it is
/// sent (`refuses`, which the outbox asks when the event is emitted) and when it is published
/// (a `Refused` error, which the relay sets aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_it_would_refuse_is_what_the_server_refuses() {
    let nats = match tegu_test_support::servers::nats() {
        Ok(url) => url,
        Err(why) => return tegu_test_support::servers::skip("refuses", why),
    };
    let stream = format!("J{}", std::process::id());
    let app = App::builder()
        .register(JetStream::proto())
        .config_value("nats.url", nats)
        .config_value("nats.stream", &stream)
        .config_value("nats.subjects", stream.to_lowercase())
        .build()
        .await
        .unwrap();
    let broker = app.get_object::<JetStream>().unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    let header = "NATS/1.0\r\nNats-Msg-Id: \r\n\r\n".len() + id.len();
    let fits = vec![b'x'; (1 << 20) - header];
    let event = Outgoing { id, name: "big.fits", payload: &fits, headers: &[] };
    assert_eq!(broker.refuses(event), None);
    broker.publish(event).await.unwrap();
    let over = vec![b'x'; (1 << 20) - header + 1];
    let event = Outgoing { id: "1123456789abcdef0123456789abcdef", name: "big.over", payload: &over, headers: &[] };
    let why = broker.refuses(event).expect("refused");
    assert!(why.contains("max_payload"), "{why}");
    let error = broker.publish(event).await.unwrap_err();
    assert!(error.is::<Refused>(), "{error}");

    // The event's own headers count too, each as "<name>: <value>\r\n".
    let headers = [("tegu-tenant".to_owned(), "acme".to_owned()), ("traceparent".to_owned(), "t".repeat(55))];
    let own: usize = headers.iter().map(|(name, value)| name.len() + ": \r\n".len() + value.len()).sum();
    let fits = vec![b'x'; (1 << 20) - header - own];
    let event =
        Outgoing { id: "2123456789abcdef0123456789abcdef", name: "big.fits", payload: &fits, headers: &headers };
    assert_eq!(broker.refuses(event), None);
    broker.publish(event).await.unwrap();
    let over = vec![b'x'; (1 << 20) - header - own + 1];
    let event =
        Outgoing { id: "3123456789abcdef0123456789abcdef", name: "big.over", payload: &over, headers: &headers };
    assert!(broker.refuses(event).is_some_and(|why| why.contains("max_payload")));
    assert!(broker.publish(event).await.unwrap_err().is::<Refused>());
    app.shutdown().await.unwrap();
}

/// A stream that takes smaller messages than the server (`max_msg_size`, set by the operator
/// who created it beforehand) is the limit `refuses` checks: an event that fills it exactly,
/// headers included, is taken; one byte more is refused when it is emitted, naming the stream's
/// limit, and its publish is `Refused`, alone or in a batch, which stops there and counts what
/// the server stored before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_stream_takes_is_refused_when_it_is_emitted() {
    let Some(server) = Server::new("stream_limit").await else { return };
    let config = async_nats::jetstream::stream::Config {
        name: server.stream.clone(),
        subjects: vec![format!("{}.>", server.subjects)],
        max_message_size: 4096,
        ..Default::default()
    };
    server.js.create_stream(config).await.unwrap();
    let (app, broker) = server.broker("stream_limit").await;
    let header = "NATS/1.0\r\nNats-Msg-Id: \r\n\r\n".len() + "e0".len();
    let fits = vec![b'x'; 4096 - header];
    let event = |id, payload| Outgoing { id, name: "big.one", payload, headers: &[] };
    assert_eq!(broker.refuses(event("e0", &fits)), None);
    broker.publish(event("e0", &fits)).await.unwrap();
    let large = vec![b'x'; 4096 - header + 1];
    let why = broker.refuses(event("e1", &large)).expect("over the stream's max_msg_size");
    assert!(why.contains("max_msg_size (4096)") && why.contains(&server.stream), "{why}");
    let error = broker.publish(event("e1", &large)).await.unwrap_err();
    assert!(error.is::<Refused>(), "{error}");
    let (done, result) = broker.publish_all(&[event("e2", b"{}"), event("e3", &large), event("e4", b"{}")]).await;
    assert_eq!(done, 1);
    let error = result.unwrap_err();
    assert!(error.is::<Refused>(), "{error}");
    // e0, e2, and e4, sent in the same batch (the relay publishes it again, and the server
    // keeps one); never e1 or e3.
    assert_eq!(server.stream_info().await.expect("the stream").state.messages, 3);
    app.shutdown().await.unwrap();
}

/// An operator who lowers the stream's `max_msg_size` while the instance runs: `refuses` reads
/// the stream's info again once what it read is 5 s old, and at once after a publish the
/// stream refused for its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_limit_lowered_while_running_is_seen_within_seconds() {
    let Some(server) = Server::new("limit_lowered").await else { return };
    let (app, broker) = server.broker("limit_lowered").await;
    let large = vec![b'x'; 8192];
    let event = |id, payload| Outgoing { id, name: "big.one", payload, headers: &[] };
    assert_eq!(broker.refuses(event("e1", &large)), None, "no limit of the stream's own");
    let lower = |max| {
        let js = server.js.clone();
        let name = server.stream.clone();
        async move {
            let mut config = js.get_stream(&name).await.unwrap().cached_info().config.clone();
            config.max_message_size = max;
            js.update_stream(config).await.unwrap();
        }
    };
    lower(4096).await;
    let seen = async {
        while broker.refuses(event("e1", &large)).is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), seen).await.expect("the lowered limit seen within 10 s");

    // Just read: lowered again, the refused publish has it read at once, well before 5 s.
    lower(2048).await;
    let middle = vec![b'x'; 3000];
    assert_eq!(broker.refuses(event("e2", &middle)), None, "the limit read before");
    assert!(broker.publish(event("e2", &middle)).await.unwrap_err().is::<Refused>());
    let seen = async {
        loop {
            match broker.refuses(event("e2", &middle)) {
                Some(why) => break why,
                None => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    let why = tokio::time::timeout(Duration::from_secs(2), seen).await.expect("seen after the refused publish");
    assert!(why.contains("max_msg_size (2048)"), "{why}");
    app.shutdown().await.unwrap();
}
