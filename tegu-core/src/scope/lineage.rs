//! A scope's lineage at run time: captured from the current scope, seeded into the scopes of
//! the work it causes, read back from headers; and the protos of the lineage types.

use crate::error::DiError;
use crate::lineage::{Lineage, Tenant, TraceContext, TraceState, Travels};
use crate::proto::descriptor::ProtoDef;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::traits::{ContextProto, Proto};
use crate::resolver::Resolver;
use crate::runtime::AppInner;

use super::handle::Seeds;

impl Lineage {
    /// The current scope's lineage: its values of the App's lineage types (seeded, inherited
    /// from the request that caused its work, or built by their factory). Empty outside a scope,
    /// or in an App without lineage types. An outbox calls it to write an event's headers.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, lineage::{Lineage, Tenant}};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().without_inventory().lineage::<Tenant>().build().await?;
    /// let seen = app.scope().tenant("acme")?.run(async { Lineage::current() }).await;
    /// assert_eq!(seen.get::<Tenant>().map(Tenant::key), Some("acme"));
    /// assert!(Lineage::current().is_empty()); // outside a scope
    /// # Ok(()) }
    /// ```
    pub fn current() -> Lineage {
        super::handle::lineage_now()
    }
}

/// The current scope's lineage if it is a scope of `app`, else none: the lineage of the request
/// whose work `app` does now (an emit, a job started, a commit). A scope of another App is not
/// `app`'s request, and an App without lineage types has none to read.
pub(crate) fn of_app(app: &AppInner) -> Lineage {
    if app.lineage.is_empty() || !super::handle::in_scope_of(app.id) {
        return Lineage::new();
    }
    Lineage::current()
}

/// `lineage`'s values of `app`'s lineage types, as a scope's seeds; the others are left out.
pub(crate) fn seeds(app: &AppInner, lineage: &Lineage) -> Seeds {
    let mut seeds = Seeds::default();
    for (travel, value) in lineage.values() {
        if let Some(slot) = app.lineage.iter().find(|s| (s.travel.type_id)() == (travel.type_id)()) {
            seeds.set(slot.key, value.clone(), false);
        }
    }
    seeds
}

/// The lineage `headers` carry, for `app`'s lineage types: a header of no lineage type is left
/// out, and so is a value its type refuses (logged, the value escaped), and a header given more
/// than once (which of them would be the request's?).
pub(crate) fn from_headers<'h>(app: &AppInner, headers: impl IntoIterator<Item = (&'h str, &'h str)>) -> Lineage {
    let mut found: Vec<(&crate::lineage::LineageSlot, &'h str, usize)> = Vec::new();
    for (name, value) in headers {
        let Some(slot) = app.lineage.iter().find(|s| s.travel.header.eq_ignore_ascii_case(name)) else { continue };
        match found.iter_mut().find(|(s, _, _)| s.key == slot.key) {
            Some((_, _, times)) => *times += 1,
            None => found.push((slot, value, 1)),
        }
    }
    let mut lineage = Lineage::new();
    for (slot, value, times) in found {
        if times > 1 {
            tracing::warn!(
                header = slot.travel.header,
                times,
                "a lineage header was given more than once, and left out"
            );
            continue;
        }
        match crate::lineage::isolated(slot.travel, "decode", || (slot.travel.decode)(value)) {
            None => {}
            Some(Ok(value)) => lineage.put(slot.travel, value),
            Some(Err(error)) => tracing::warn!(
                header = slot.travel.header,
                error = ?error.to_string(),
                "a lineage header was refused, and left out of the handler's scope"
            ),
        }
    }
    lineage
}

/// The log fields the spans of a request's work have, which a lineage type may fill.
const LOG_FIELDS: [&str; 3] = ["request_id", "trace_id", "tenant"];

/// Refuses lineage types of `graph` that cannot travel: a header that is no lowercase header
/// name (letters, digits, `-`), one NATS keeps for itself (`nats-`), or one of two types; a log
/// field the spans do not have, or one of two types.
pub(crate) fn check_types(graph: &crate::graph::Graph) -> Result<(), DiError> {
    let travels: Vec<&crate::lineage::Travel> = graph.protos.iter().filter_map(|p| p.travel.map(|(t, _)| t)).collect();
    let mut errors = Vec::new();
    for (i, t) in travels.iter().enumerate() {
        let ty = (t.type_name)();
        let refuse = |why: String| DiError::LineageType { ty, why };
        let name_ok =
            !t.header.is_empty() && t.header.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !name_ok {
            errors.push(refuse(format!("its header {:?} is not lowercase ASCII letters, digits and `-`", t.header)));
        } else if t.header.starts_with("nats-") {
            errors.push(refuse(format!("its header {:?} starts with `nats-`, which NATS keeps for itself", t.header)));
        }
        if let Some(field) = t.log_field.filter(|f| !LOG_FIELDS.contains(f)) {
            errors.push(refuse(format!("its log field {field:?} is none of the spans' fields, {LOG_FIELDS:?}")));
        }
        for other in travels.iter().skip(i + 1).filter(|o| (o.type_id)() != (t.type_id)()) {
            if other.header.eq_ignore_ascii_case(t.header) {
                errors.push(refuse(format!(
                    "its header {:?} is also `{}`'s; give each type a header of its own",
                    t.header,
                    (other.type_name)()
                )));
            }
            if t.log_field.is_some() && other.log_field == t.log_field {
                errors.push(refuse(format!(
                    "its log field {:?} is also `{}`'s; give each type a field of its own, or none",
                    t.log_field.unwrap_or_default(),
                    (other.type_name)()
                )));
            }
        }
    }
    DiError::collect(errors)
}

/// Records `lineage`'s log fields in `span` and lets the App's [`TraceLink`](crate::lineage::TraceLink)
/// set its parent: for the span of a scope that runs work a request caused.
pub(crate) fn link(app: &AppInner, span: &tracing::Span, lineage: &Lineage, work: crate::lineage::LinkedWork) {
    lineage.record(span);
    if let Some(link) = &app.trace_link
        && let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| link.link(span, lineage, work)))
    {
        let panic = crate::isolate::panic_message(&*panic);
        tracing::error!(panic = ?panic, "the App's `TraceLink` panicked; the span keeps its parent");
    }
}

impl ProtoDef {
    /// The context proto of lineage type `T`: a scope has a `T` only when it is seeded with one
    /// ([`ScopeBuilder::lineage`](crate::scope::ScopeBuilder::lineage), a request's layer) or
    /// inherits one from the request that caused its work (its handlers, tasks and jobs). Read
    /// elsewhere, it fails with [`DiError::NoLineage`]. The same as
    /// [`AppBuilder::lineage`](crate::AppBuilder::lineage).
    ///
    /// See [`Travels`] for an example.
    #[track_caller]
    pub fn lineage<T: Travels>() -> ProtoDef {
        ProtoDef::from(ProtoDescriptor::lineage::<T>(""))
    }

    /// The context proto of lineage type `T`, built by `factory` in a scope that was given no
    /// `T` (a request's id, from its head); a scope that was given one, or inherits one, uses
    /// that.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef, error::BoxError, lineage::{Lineage, Travels}};
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Locale(String);
    ///
    /// impl Travels for Locale {
    ///     const HEADER: &'static str = "x-locale";
    ///     fn encode(&self) -> String { self.0.clone() }
    ///     fn decode(value: &str) -> Result<Self, BoxError> { Ok(Locale(value.into())) }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::lineage_from::<Locale>(|_| Ok(Locale("en".into()))))
    ///     .build()
    ///     .await?;
    /// let built = app.run_in_context(async { Lineage::current() }).await;
    /// assert_eq!(built.get::<Locale>(), Some(&Locale("en".into())));
    /// let given = Lineage::new().with(Locale("fr".into()));
    /// let kept = app.scope().lineage(&given).run(async { Lineage::current() }).await;
    /// assert_eq!(kept.get::<Locale>(), Some(&Locale("fr".into())));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn lineage_from<T: Travels>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> ProtoDef {
        let mut def = ProtoDef::context::<T>(factory);
        def.0.travel = Some((crate::lineage::travel::<T>(), true));
        def
    }
}

impl Proto for Tenant {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::lineage::<Tenant>("");
}
impl ContextProto for Tenant {}
inventory::submit! { <Tenant as Proto>::DESCRIPTOR }

impl Proto for TraceContext {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::lineage::<TraceContext>("");
}
impl ContextProto for TraceContext {}
inventory::submit! { <TraceContext as Proto>::DESCRIPTOR }

impl Proto for TraceState {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::lineage::<TraceState>("");
}
impl ContextProto for TraceState {}
inventory::submit! { <TraceState as Proto>::DESCRIPTOR }
