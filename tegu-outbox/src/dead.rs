//! Dead letters: the events the outbox could not bring to their end, in one place. The broker's
//! refusals, the events a handler failed on every try, and those that arrived undecodable or of
//! a type this instance does not know; each with its headers (the emitting request's lineage),
//! the error and the tries, to list, replay or discard.

/// Why an event is a dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Why {
    /// The broker refused it for good ([`Refused`](crate::Refused)): it was never published.
    /// A replay writes it to the outbox again.
    Refused,
    /// The handler named failed it on every try. A replay hands it to that handler again, on
    /// the instance asked, in a scope seeded with the event's lineage.
    Failed {
        /// The handler: its proto's type and its method (`my_app::Mailer::on_shipped`).
        handler: String,
    },
    /// Its JSON is not its type's (a producer of another version, a broken message). A
    /// replay decodes it again, with the code now running, for this instance's handlers.
    Undecodable,
    /// No event type of the instance that received it has its name (an instance older than
    /// the producer). A replay, on an instance that knows it, hands it to its handlers.
    Unknown,
}

impl Why {
    /// The kind, as a store keeps it: `refused`, `failed`, `undecodable`, `unknown`.
    pub fn kind(&self) -> &'static str {
        match self {
            Why::Refused => "refused",
            Why::Failed { .. } => "failed",
            Why::Undecodable => "undecodable",
            Why::Unknown => "unknown",
        }
    }

    /// The handler, for [`Why::Failed`].
    pub fn handler(&self) -> Option<&str> {
        match self {
            Why::Failed { handler } => Some(handler),
            _ => None,
        }
    }

    /// The reason a store kept as `kind` and `handler`; `None` for a kind it does not know (a
    /// later version's).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_outbox::Why;
    ///
    /// let why = Why::Failed { handler: "my_app::Mailer::on_shipped".into() };
    /// assert_eq!(Why::from_kind(why.kind(), why.handler()), Some(why));
    /// assert_eq!(Why::from_kind("refused", None), Some(Why::Refused));
    /// assert_eq!(Why::from_kind("failed", None), None);
    /// ```
    pub fn from_kind(kind: &str, handler: Option<&str>) -> Option<Why> {
        match (kind, handler) {
            ("refused", _) => Some(Why::Refused),
            ("failed", Some(handler)) => Some(Why::Failed { handler: handler.to_owned() }),
            ("undecodable", _) => Some(Why::Undecodable),
            ("unknown", _) => Some(Why::Unknown),
            _ => None,
        }
    }
}

/// An event set aside as a dead letter, as the [`OutboxStore`](crate::OutboxStore) keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Its number in the store (0 before it is stored).
    pub id: i64,
    /// Why it is here.
    pub why: Why,
    /// The event's id.
    pub event_id: String,
    /// The event's name.
    pub name: String,
    /// The event's JSON. Never logged: it is the service's data.
    pub payload: Vec<u8>,
    /// The lineage of the request that emitted it, as headers: its tenant, its trace, its
    /// request id. A replay's handler runs in a scope seeded with it.
    pub headers: Vec<(String, String)>,
    /// The last error: the broker's refusal, the handler's error, the decoder's.
    pub error: String,
    /// How many times it was tried (the handler's tries; 1 for the others).
    pub attempts: u32,
    /// When it was set aside: milliseconds since the Unix epoch, on the setting instance's clock.
    pub at: i64,
    /// The name of the subscription that received it ([`Broker::receiver`](crate::Broker::receiver));
    /// empty for one the broker refused. A replay of a handler's dead letter, on any instance,
    /// reads and writes the inbox's record of that handler under it.
    pub receiver: String,
}

impl DeadLetter {
    /// A dead letter of the event (`event_id`, `name`, `payload`, `headers`), not stored yet:
    /// tried once, set aside now, its error to fill in.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_outbox::{DeadLetter, Why};
    ///
    /// let mut letter = DeadLetter::new(Why::Undecodable, "5f0c", "todos.completed", b"{".to_vec(), Vec::new());
    /// letter.error = "EOF while parsing an object".into();
    /// assert_eq!((letter.id, letter.attempts), (0, 1));
    /// ```
    pub fn new(
        why: Why,
        event_id: impl Into<String>,
        name: impl Into<String>,
        payload: Vec<u8>,
        headers: Vec<(String, String)>,
    ) -> DeadLetter {
        DeadLetter {
            id: 0,
            why,
            event_id: event_id.into(),
            name: name.into(),
            payload,
            headers,
            error: String::new(),
            attempts: 1,
            at: crate::clock::now_ms(),
            receiver: String::new(),
        }
    }
}
