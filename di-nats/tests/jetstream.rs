//! `JetStream` against a real NATS server (`di_test_support::servers::nats`): what it says it
//! would refuse is exactly what the server refuses, and a refusal is told apart from a failure
//! that passes.

use di_core::App;
use di_nats::JetStream;
use di_outbox::{Broker, Outgoing, Refused};

/// The server's `max_payload` (1 MiB by default) counts the headers too: an event whose payload
/// and `Nats-Msg-Id` header fill it exactly is taken; one byte more is refused, before it is
/// sent (`refuses`, which the outbox asks when the event is emitted) and when it is published
/// (a `Refused` error, which the relay sets aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_it_would_refuse_is_what_the_server_refuses() {
    let nats = match di_test_support::servers::nats() {
        Ok(url) => url,
        Err(why) => return di_test_support::servers::skip("refuses", why),
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
    let event = Outgoing { id, name: "big.fits", payload: &fits };
    assert_eq!(broker.refuses(event), None);
    broker.publish(event).await.unwrap();
    let over = vec![b'x'; (1 << 20) - header + 1];
    let event = Outgoing { id: "1123456789abcdef0123456789abcdef", name: "big.over", payload: &over };
    let why = broker.refuses(event).expect("refused");
    assert!(why.contains("max_payload"), "{why}");
    let error = broker.publish(event).await.unwrap_err();
    assert!(error.is::<Refused>(), "{error}");
    app.shutdown().await.unwrap();
}
