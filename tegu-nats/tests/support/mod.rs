//! What tegu-nats' tests share: the NATS server (`tegu_test_support::servers::nats`, skipped
//! without one unless `DI_TEST_REQUIRE_SERVERS=1`), a stream of each test's own on it, a
//! `JetStream` broker in an App, and a client of the test's own to look at the server.

#![allow(dead_code, reason = "each test file uses some of the helpers")]

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use tegu_core::{App, AppBuilder};
use tegu_nats::JetStream;
use tegu_outbox::{Received, Subscription};

/// A test's stream on the server, and a client to look at it.
pub(crate) struct Server {
    /// The server's URL.
    pub(crate) url: String,
    /// The test's stream: `N<pid>_<test>`.
    pub(crate) stream: String,
    /// The first token of the test's subjects: the stream's name, in lower case.
    pub(crate) subjects: String,
    /// The test's own JetStream client, beside the broker's.
    pub(crate) js: jetstream::Context,
}

impl Server {
    /// The server, with a stream name for `test`; `None` (the test skips) without a server.
    pub(crate) async fn new(test: &str) -> Option<Server> {
        let url = match tegu_test_support::servers::nats() {
            Ok(url) => url.to_owned(),
            Err(why) => {
                tegu_test_support::servers::skip(test, why);
                return None;
            }
        };
        let stream = format!("N{}_{test}", std::process::id());
        let subjects = stream.to_lowercase();
        let client = async_nats::connect(url.as_str()).await.expect("connecting to NATS");
        let js = jetstream::new(client);
        // A stream a previous run with the same process id left.
        let _ = js.delete_stream(&stream).await;
        Some(Server { url, stream, subjects, js })
    }

    /// An App with a `JetStream` on the test's stream, its consumer named `consumer`.
    pub(crate) fn app(&self, consumer: &str) -> AppBuilder {
        App::builder()
            .register(JetStream::proto())
            .config_value("nats.url", &self.url)
            .config_value("nats.stream", &self.stream)
            .config_value("nats.subjects", &self.subjects)
            .config_value("nats.consumer", consumer)
    }

    /// A built App's broker, and the App.
    pub(crate) async fn broker(&self, consumer: &str) -> (App, Arc<JetStream>) {
        let app = self.app(consumer).build().await.expect("the App with JetStream");
        let broker = app.get_object::<JetStream>().expect("the broker");
        (app, broker)
    }

    /// The stream the server has now, if it has it.
    pub(crate) async fn stream_info(&self) -> Option<jetstream::stream::Info> {
        let mut stream = self.js.get_stream(&self.stream).await.ok()?;
        stream.info().await.ok().cloned()
    }

    /// Whether the server has the consumer `name` on the test's stream.
    pub(crate) async fn has_consumer(&self, name: &str) -> bool {
        match self.js.get_stream(&self.stream).await {
            Ok(stream) => stream.consumer_info(name).await.is_ok(),
            Err(_) => false,
        }
    }
}

/// The next event; panics if none comes within 10 s, or the subscription ends or fails.
pub(crate) async fn next(subscription: &mut Box<dyn Subscription>) -> Received {
    let next = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await;
    next.expect("an event within 10 s").expect("the subscription is open").expect("an event, not an error")
}

/// Whether no event comes within `wait`.
pub(crate) async fn quiet(subscription: &mut Box<dyn Subscription>, wait: Duration) -> bool {
    match tokio::time::timeout(wait, subscription.next()).await {
        Err(_) => true,
        Ok(Some(Ok(received))) => {
            eprintln!("unexpected: {received:?}");
            false
        }
        Ok(_) => false,
    }
}
