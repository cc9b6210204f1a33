//! Context that travels: the values of a request's *lineage* (its tenant, its trace, its id,
//! the user's own types) follow its work wherever it goes.
//!
//! A lineage type is a context proto registered with [`ProtoDef::lineage`](crate::ProtoDef::lineage)
//! (or [`AppBuilder::lineage`](crate::AppBuilder::lineage)): a scope has its value only when it
//! is seeded with one. Its values are then carried from the scope that has them into the scopes
//! of the work it causes:
//!
//! - the tasks it [`spawn`](crate::spawn)s (they share its scope);
//! - the scopes of the event handlers of the events it emits, in every phase;
//! - the jobs it starts ([`App::run_schedule`](crate::App::run_schedule));
//! - other processes: [`Lineage::headers`] writes them as headers (an outbox stores them with
//!   the event, a broker carries them), and [`App::lineage_from_headers`](crate::App::lineage_from_headers)
//!   reads them back in every instance, for the handler's scope.
//!
//! A handler reads them through `ContextRef<T>` as anything else. The scope of a handler or a
//! job started from a request gets a `tracing` span whose fields `request_id`, `trace_id` and
//! `tenant` are its lineage's ([`Travels::LOG_FIELD`]), so that its log lines carry them.
//!
//! Four types come with the crate: [`Tenant`], [`TraceContext`] and [`TraceState`] (W3C trace
//! context), and tegu-http's `RequestId`.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use crate::erased::AnyArc;
use crate::error::{BoxError, DiError};

/// A context value that belongs to a request's lineage: it follows the request's work into
/// tasks, event handlers, jobs and other processes. Crossing a process, it is one header.
///
/// # Examples
///
/// ```
/// use tegu_core::{App, ContextRef, error::BoxError, lineage::{Lineage, Travels}};
///
/// /// Who made the request: put in the scope by the service's authentication.
/// #[derive(Debug, PartialEq)]
/// struct User(String);
///
/// impl Travels for User {
///     const HEADER: &'static str = "x-user";
///     fn encode(&self) -> String {
///         self.0.clone()
///     }
///     fn decode(value: &str) -> Result<Self, BoxError> {
///         Ok(User(value.to_owned()))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().without_inventory().lineage::<User>().build().await?;
/// let lineage = Lineage::new().with(User("ada".into()));
/// assert_eq!(lineage.headers().collect::<Vec<_>>(), [("x-user", "ada".to_owned())]);
/// let seen = app.scope().lineage(&lineage).run(async { Lineage::current().get::<User>().map(|u| u.0.clone()) }).await;
/// assert_eq!(seen.as_deref(), Some("ada"));
/// # Ok(()) }
/// ```
pub trait Travels: Send + Sync + Sized + 'static {
    /// The header that carries the value across a process: lowercase ASCII, unique among the
    /// App's lineage types.
    const HEADER: &'static str;

    /// The log field that shows the value in the spans of the work the request causes:
    /// `"request_id"`, `"trace_id"` or `"tenant"` (the fields those spans have), or none.
    const LOG_FIELD: Option<&'static str> = None;

    /// The value as a header value: visible ASCII, no line breaks.
    fn encode(&self) -> String;

    /// The value of a header written by [`encode`](Self::encode), which may come from anyone:
    /// check it. The error should not quote the value.
    ///
    /// # Errors
    ///
    /// When the header is no such value: the value is left out, and logged as ignored.
    fn decode(value: &str) -> Result<Self, BoxError>;

    /// What the log field shows: by default the header value.
    fn log_value(&self) -> String {
        self.encode()
    }
}

/// How a lineage type's values are handled without their type: what [`Travels`] gives, erased.
#[doc(hidden)]
pub struct Travel {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) header: &'static str,
    pub(crate) log_field: Option<&'static str>,
    encode: fn(&AnyArc) -> String,
    log_value: fn(&AnyArc) -> String,
    pub(crate) decode: fn(&str) -> Result<AnyArc, BoxError>,
}

impl fmt::Debug for Travel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Travel").field("type", &(self.type_name)()).field("header", &self.header).finish()
    }
}

fn as_t<T: 'static>(obj: &AnyArc) -> &T {
    match obj.downcast_ref::<T>() {
        Some(value) => value,
        None => unreachable!("a lineage value is stored with its type's travel"),
    }
}

/// Runs `f`, a lineage type's own code: a panic in it is caught and logged with the type and the
/// method, and gives `None` (the value is left out), so that a type's bug fails no request,
/// handler or relay.
pub(crate) fn isolated<R>(travel: &Travel, method: &'static str, f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(panic) => {
            tracing::error!(
                lineage = (travel.type_name)(),
                method,
                panic = ?crate::isolate::panic_message(&*panic),
                "a lineage type's method panicked; its value is left out"
            );
            None
        }
    }
}

/// The erased [`Travels`] of `T`.
pub(crate) const fn travel<T: Travels>() -> &'static Travel {
    const {
        &Travel {
            type_id: TypeId::of::<T>,
            type_name: std::any::type_name::<T>,
            header: T::HEADER,
            log_field: T::LOG_FIELD,
            encode: |obj| as_t::<T>(obj).encode(),
            log_value: |obj| as_t::<T>(obj).log_value(),
            decode: |value| T::decode(value).map(|v| Arc::new(v) as AnyArc),
        }
    }
}

/// An event type a job or a handler declares it emits (`emits(..)` on `#[schedule]` and
/// `#[event_handler]`): generated code.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Emitted {
    pub ty: fn() -> TypeId,
    pub name: fn() -> &'static str,
}

/// A set of lineage values, by type: the current scope's ([`Lineage::current`]), one to seed a
/// scope with ([`ScopeBuilder::lineage`](crate::scope::ScopeBuilder::lineage)), or one read from
/// a message's headers. Cheap to clone.
///
/// A tower layer puts one in a request's extensions to seed the request's scope with it (the
/// trace context an OpenTelemetry layer read, the user an authentication layer found).
///
/// # Examples
///
/// ```
/// use tegu_core::lineage::{Lineage, Tenant, TraceContext};
///
/// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?;
/// let lineage = Lineage::new().with(Tenant::new("acme")?).with(trace);
/// assert_eq!(lineage.get::<Tenant>().map(Tenant::key), Some("acme"));
/// let headers: Vec<_> = lineage.headers().collect();
/// assert_eq!(headers[0], ("tegu-tenant", "acme".to_owned()));
/// assert_eq!(headers[1].0, "traceparent");
/// # Ok::<(), tegu_core::error::BoxError>(())
/// ```
#[derive(Clone, Default)]
pub struct Lineage {
    values: Vec<(&'static Travel, AnyArc)>,
}

impl Lineage {
    /// An empty set.
    pub fn new() -> Self {
        Lineage::default()
    }

    /// The set with `value`, replacing one of its type.
    #[must_use]
    pub fn with<T: Travels>(self, value: T) -> Self {
        self.with_arc(Arc::new(value))
    }

    /// As [`with`](Self::with), for a value already shared.
    #[must_use]
    pub fn with_arc<T: Travels>(mut self, value: Arc<T>) -> Self {
        self.put(travel::<T>(), value);
        self
    }

    pub(crate) fn put(&mut self, travel: &'static Travel, value: AnyArc) {
        match self.values.iter_mut().find(|(t, _)| (t.type_id)() == (travel.type_id)()) {
            Some(slot) => slot.1 = value,
            None => self.values.push((travel, value)),
        }
    }

    /// The value of type `T`, if the set has one.
    pub fn get<T: Travels>(&self) -> Option<&T> {
        self.values.iter().find(|(t, _)| (t.type_id)() == TypeId::of::<T>()).map(|(_, v)| as_t::<T>(v))
    }

    /// Whether the set has no value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How many values the set has.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// The values as headers: each type's [`HEADER`](Travels::HEADER) and its value. A value
    /// whose `encode` panics is left out (and the panic logged).
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        self.values.iter().filter_map(|(t, v)| Some((t.header, isolated(t, "encode", || (t.encode)(v))?)))
    }

    /// Whether `other` holds the very same values (the same objects, not equal ones): a scope's
    /// lineage captured twice, or one scope's and the scope it was opened in, when that one set
    /// nothing of its own.
    pub(crate) fn same_values(&self, other: &Lineage) -> bool {
        self.values.len() == other.values.len()
            && self
                .values
                .iter()
                .all(|(t, v)| other.values.iter().any(|(o, w)| (o.type_id)() == (t.type_id)() && Arc::ptr_eq(v, w)))
    }

    /// The values, erased, with their travel.
    pub(crate) fn values(&self) -> impl Iterator<Item = &(&'static Travel, AnyArc)> {
        self.values.iter()
    }

    /// Records the values that have a [log field](Travels::LOG_FIELD) in `span`'s fields of
    /// that name (a span without such a field is left as it is), Debug-quoted: what tegu-http
    /// does with a request's span, and the container with the spans of the work it causes.
    pub fn record(&self, span: &tracing::Span) {
        for (travel, value) in &self.values {
            if let Some(field) = travel.log_field
                && let Some(shown) = isolated(travel, "log_value", || (travel.log_value)(value))
            {
                // A string: OpenTelemetry gets it as it is, a log line quoted (`tenant="acme"`).
                span.record(field, shown.as_str());
            }
        }
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug-quoted: a value from a client cannot forge a line.
        f.debug_map().entries(self.headers()).finish()
    }
}

/// Sets the OpenTelemetry parent of the spans of the scopes the container opens for a request's
/// work (event handlers, jobs): a singleton that provides it (`provides(dyn TraceLink)`),
/// tegu-otel's. An App has at most one; without one, those spans are plain `tracing` spans with
/// the lineage's log fields.
///
/// An event handler's span (`event handler`) has the empty field `otel.kind`, which a link may
/// record (`"consumer"` for an event a transport delivered).
pub trait TraceLink: Send + Sync + 'static {
    /// Called once for each such span, before it is entered, with the scope's lineage and what
    /// the span is of.
    fn link(&self, span: &tracing::Span, lineage: &Lineage, work: LinkedWork);
}

/// What a span that a [`TraceLink`] links is the span of, and so where the trace context in its
/// lineage comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkedWork {
    /// A job (`App::run_schedule` in a scope of this process; one the scheduler starts has no
    /// trace context).
    Job,
    /// A handler of an event emitted in this process: its lineage is the one the emitting
    /// scope had, and its trace context names a span of this process (with tegu-otel, the
    /// request's server span).
    Event,
    /// A handler of an event a transport delivered (`EventBus::deliver_with`): its lineage was
    /// read from a message's headers, and its trace context names the span that created the
    /// message, in the process that emitted it.
    Delivered,
}

/// The tenant a scope serves: its key (a customer id, a subdomain). A scope gets one from
/// [`ScopeBuilder::tenant`](crate::scope::ScopeBuilder::tenant), from an HTTP request (tegu-http's
/// tenant resolver), or from the lineage of the request that caused its work; a
/// [`TenantRef`](crate::tenant::TenantRef) read in a scope without one fails with
/// [`DiError::NoTenant`]. Cheap to clone.
///
/// A key comes from a client (a header, a host name), so it is checked: 1 to
/// [`MAX_LEN`](Self::MAX_LEN) ASCII letters, digits, `-`, `_` and `.`. Logs write it quoted
/// (as `Debug`), never as text of the message.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tenant(Arc<str>);

impl Tenant {
    /// The longest key, in bytes.
    pub const MAX_LEN: usize = 128;

    /// The tenant with key `key`.
    ///
    /// # Errors
    ///
    /// [`DiError::TenantKey`] if the key is empty, longer than [`MAX_LEN`](Self::MAX_LEN) or
    /// has a character other than ASCII letters, digits, `-`, `_` and `.`; the error says
    /// which rule, never the key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{DiError, tenant::Tenant};
    ///
    /// assert_eq!(Tenant::new("acme-eu.1")?.key(), "acme-eu.1");
    /// assert!(matches!(Tenant::new("acme user=admin"), Err(DiError::TenantKey { .. })));
    /// assert!(matches!(Tenant::new(""), Err(DiError::TenantKey { .. })));
    /// # Ok::<(), DiError>(())
    /// ```
    pub fn new(key: impl Into<Arc<str>>) -> Result<Self, DiError> {
        let key: Arc<str> = key.into();
        let refused = |why: String| Err(DiError::TenantKey { why });
        if key.is_empty() {
            return refused("it is empty".to_owned());
        }
        if key.len() > Self::MAX_LEN {
            return refused(format!("it is {} bytes long", key.len()));
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if let Some((at, c)) = key.char_indices().find(|&(_, c)| !allowed(c)) {
            return refused(format!("its byte {at} is {:?}", c.escape_debug().to_string()));
        }
        Ok(Tenant(key))
    }

    /// The tenant's key.
    pub fn key(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tenant").field(&&*self.0).finish()
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Travels for Tenant {
    const HEADER: &'static str = "tegu-tenant";
    const LOG_FIELD: Option<&'static str> = Some("tenant");

    fn encode(&self) -> String {
        self.0.to_string()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(Tenant::new(value)?)
    }
}

/// A W3C trace context (`traceparent`): the trace a request belongs to and the span that is
/// the parent of its work. Seeded by tegu-otel's layer from a request's `traceparent` header
/// (with the request's own span as the parent), it follows the request's work, so that every
/// span of that work, in every instance, belongs to the trace.
///
/// It implements [W3C Trace Context Level 1](https://www.w3.org/TR/trace-context-1/), which
/// defines one trace flag, `sampled` (`0x01`), and says the others are sent as zero: a trace
/// context keeps that flag alone, whatever it was made or read with (`…-ff` in, `…-01` out).
/// Level 2's `random` flag (`0x02`) is not kept: a trace started elsewhere says nothing of how
/// its id was made.
///
/// # Examples
///
/// ```
/// use tegu_core::lineage::TraceContext;
///
/// let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// let trace = TraceContext::parse(header)?;
/// assert_eq!(trace.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(trace.sampled());
/// assert_eq!(trace.to_string(), header);
/// assert!(TraceContext::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_err());
/// // Flags Level 1 does not define are not passed on.
/// let reserved = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff")?;
/// assert_eq!(reserved.to_string(), header);
/// # Ok::<(), tegu_core::error::BoxError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace's id: not all zero.
    trace_id: [u8; 16],
    /// The parent span's id: not all zero.
    span_id: [u8; 8],
    /// The trace flags: `SAMPLED` or none.
    flags: u8,
}

impl TraceContext {
    /// The trace flag `sampled`, the one W3C Trace Context Level 1 defines: the only flag a
    /// trace context keeps.
    pub const SAMPLED: u8 = 0x01;

    /// The trace context of trace `trace_id`, whose parent span is `span_id`, with `flags`
    /// (bit 0: sampled; the others, which Level 1 does not define, are left out): what a
    /// tracing library's span gives.
    ///
    /// # Errors
    ///
    /// When either id is all zero, which the W3C recommendation makes invalid.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::lineage::TraceContext;
    ///
    /// let trace = TraceContext::new([0x4b; 16], [0x01; 8], 1)?;
    /// assert_eq!(trace.span_id_hex(), "0101010101010101");
    /// assert_eq!((trace.trace_id(), trace.span_id(), trace.flags()), ([0x4b; 16], [0x01; 8], 1));
    /// assert!(TraceContext::new([0; 16], [0x01; 8], 1).is_err());
    /// # Ok::<(), tegu_core::error::BoxError>(())
    /// ```
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Result<Self, BoxError> {
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err("a trace context's trace id and parent id are not all zero".into());
        }
        Ok(TraceContext { trace_id, span_id, flags: flags & Self::SAMPLED })
    }

    /// The trace's id, never all zero.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The parent span's id, never all zero.
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// The trace flags: [`SAMPLED`](Self::SAMPLED) or none.
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// This trace context with `flags` instead of its own (its `sampled` bit; the others are left
    /// out, as [`new`](Self::new) does).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::lineage::TraceContext;
    ///
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?;
    /// assert!(!trace.with_flags(0).sampled());
    /// # Ok::<(), tegu_core::error::BoxError>(())
    /// ```
    #[must_use]
    pub fn with_flags(self, flags: u8) -> Self {
        TraceContext { flags: flags & Self::SAMPLED, ..self }
    }

    /// Reads a `traceparent` header of version `00` (a later version's first four fields, as
    /// the W3C recommendation says), keeping the flag `sampled` alone.
    ///
    /// # Errors
    ///
    /// When the value is no trace context, or its trace or span id is all zero; the error does
    /// not quote it.
    pub fn parse(value: &str) -> Result<Self, BoxError> {
        fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
            if text.len() != 2 * N || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let mut out = [0; N];
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
            }
            Some(out)
        }
        let mut parts = value.trim().split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("a traceparent has four fields separated by `-`".into());
        };
        let version = hex::<1>(version).ok_or("a traceparent's version is two lowercase hex digits")?[0];
        if version == 0xff || (version == 0 && parts.next().is_some()) {
            return Err("a traceparent of version 00 has four fields, and version ff is invalid".into());
        }
        let trace_id = hex::<16>(trace).ok_or("a traceparent's trace id is 32 lowercase hex digits")?;
        let span_id = hex::<8>(span).ok_or("a traceparent's parent id is 16 lowercase hex digits")?;
        let flags = hex::<1>(flags).ok_or("a traceparent's flags are two lowercase hex digits")?[0];
        Self::new(trace_id, span_id, flags)
    }

    /// The trace id as 32 lowercase hex digits, as logs and trace viewers show it.
    pub fn trace_id_hex(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The parent span id as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> String {
        self.span_id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether the trace is sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & Self::SAMPLED != 0
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "00-{}-{}-{:02x}", self.trace_id_hex(), self.span_id_hex(), self.flags)
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceContext({self})")
    }
}

impl Travels for TraceContext {
    const HEADER: &'static str = "traceparent";
    const LOG_FIELD: Option<&'static str> = Some("trace_id");

    fn encode(&self) -> String {
        self.to_string()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Self::parse(value)
    }

    fn log_value(&self) -> String {
        self.trace_id_hex()
    }
}

/// A W3C `tracestate`: the vendors' part of a trace context, carried as it came when it is at
/// most 512 characters long, trimmed as the recommendation's "tracestate Limits" say when it is
/// longer; visible ASCII characters (spaces allowed), so that it can be a header's value
/// anywhere.
///
/// # Examples
///
/// ```
/// use tegu_core::lineage::{TraceState, Travels};
///
/// assert_eq!(TraceState::decode("congo=t61rcWkgMzE")?.as_str(), "congo=t61rcWkgMzE");
/// assert_eq!(TraceState::new("rojo=00f067aa0ba902b7")?.encode(), "rojo=00f067aa0ba902b7");
/// assert!(TraceState::decode("a=b\nforged=line").is_err());
/// # Ok::<(), tegu_core::error::BoxError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TraceState(Arc<str>);

impl TraceState {
    /// The length a `tracestate` is trimmed to: the 512 characters the W3C recommendation asks
    /// every vendor to pass on.
    pub const MAX_LEN: usize = 512;

    /// A `tracestate` of `value`: as it came if it is at most [`MAX_LEN`](Self::MAX_LEN)
    /// characters long; else trimmed as the W3C recommendation says ("tracestate Limits"): its
    /// entries longer than 128 characters left out first, then entries from its end, until it
    /// fits (the entries kept are joined by `,`).
    ///
    /// # Errors
    ///
    /// When `value` has a character that is no visible ASCII character or space (a line break
    /// would forge a header); the error does not quote it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::lineage::TraceState;
    ///
    /// let long = format!("big={}, rojo=00f067aa0ba902b7, congo=t61rcWkgMzE, more={}", "x".repeat(200), "y".repeat(300));
    /// assert_eq!(TraceState::new(&long)?.as_str(), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    /// # Ok::<(), tegu_core::error::BoxError>(())
    /// ```
    pub fn new(value: &str) -> Result<Self, BoxError> {
        if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err("a tracestate is visible ASCII characters".into());
        }
        if value.len() <= Self::MAX_LEN {
            return Ok(TraceState(value.into()));
        }
        let mut entries: Vec<&str> =
            value.split(',').map(|e| e.trim_matches([' ', '\t'])).filter(|e| !e.is_empty() && e.len() <= 128).collect();
        let len = |entries: &[&str]| entries.iter().map(|e| e.len()).sum::<usize>() + entries.len().saturating_sub(1);
        while len(&entries) > Self::MAX_LEN {
            entries.pop();
        }
        Ok(TraceState(entries.join(",").into()))
    }

    /// The value, as it came.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Travels for TraceState {
    const HEADER: &'static str = "tracestate";

    fn encode(&self) -> String {
        self.0.to_string()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        Self::new(value)
    }
}

/// Where an App keeps a lineage type's values: its context proto, and whether its factory
/// builds one when no seed gave it (tegu-http's request id, from the request's head).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineageSlot {
    pub(crate) key: u32,
    pub(crate) travel: &'static Travel,
    pub(crate) builds: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_of_a_type_replaces_the_last() {
        let lineage = Lineage::new().with(Tenant::new("a").unwrap()).with(Tenant::new("b").unwrap());
        assert_eq!(lineage.len(), 1);
        assert_eq!(lineage.get::<Tenant>().map(Tenant::key), Some("b"));
    }

    #[test]
    fn traceparents_are_read_as_the_recommendation_says() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceContext::parse(ok).unwrap().to_string(), ok);
        // A later version may add fields; version 00 may not, and ff is invalid.
        assert!(TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz").is_ok());
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "garbage",
            "",
        ] {
            assert!(TraceContext::parse(bad).is_err(), "{bad}");
        }
    }
}
