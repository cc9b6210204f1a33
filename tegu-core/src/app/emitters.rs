//! What the handlers of events emitted outside any request need of their lineage: a job that
//! declares `emits(E)` runs in a scope of its own, with no request's lineage, and so does every
//! handler of `E`, and every handler of an event such a handler declares it emits. A handler
//! there whose graph reads a lineage type (a `ContextRef<Tenant>`, a `TenantRef`), or what only
//! a request's scope is given (tegu-http's `RequestHead`, and the `RequestId` built from it),
//! would fail at run time: `build()` and `check()` refuse it, naming the handler, the event, the
//! emitter and the type.

use std::any::TypeId;
use std::collections::HashMap;

use crate::error::DiError;
use crate::events::HandlerDescriptor;
use crate::graph::{Graph, Resolved};
use crate::proto::descriptor::short_type_name;

/// An event emitted outside any request: its name, and who emits it (the job, then each
/// handler between).
struct Bare {
    name: &'static str,
    emitter: String,
}

/// The handlers of `graph`'s protos, with their proto.
fn handlers(graph: &Graph) -> Vec<(usize, &'static HandlerDescriptor)> {
    inventory::iter::<HandlerDescriptor>
        .into_iter()
        .flat_map(|d| graph.of_type((d.proto)()).iter().map(move |&p| (p, d)))
        .collect()
}

/// The events that `graph`'s jobs emit (declared with `emits`), by type, with who emits them.
#[cfg(feature = "schedule")]
fn from_jobs(graph: &Graph) -> HashMap<TypeId, Bare> {
    let mut bare = HashMap::new();
    for job in inventory::iter::<crate::schedule::ScheduleDescriptor> {
        if graph.of_type((job.proto)()).is_empty() {
            continue;
        }
        for emitted in job.emits {
            let emitter = format!("schedule `{}::{}`", short_type_name((job.proto_name)()), job.method);
            bare.entry((emitted.ty)()).or_insert(Bare { name: (emitted.name)(), emitter });
        }
    }
    bare
}

#[cfg(not(feature = "schedule"))]
fn from_jobs(_: &Graph) -> HashMap<TypeId, Bare> {
    HashMap::new()
}

/// Refuses each handler of an event emitted outside any request that reads a lineage type.
pub(super) fn check(graph: &Graph) -> Result<(), DiError> {
    let mut bare = from_jobs(graph);
    if bare.is_empty() {
        return Ok(());
    }
    let handlers = handlers(graph);
    // The events those events' handlers emit, to a fixed point.
    loop {
        let mut more = Vec::new();
        for (_, d) in &handlers {
            let Some(cause) = bare.get(&(d.event)()) else { continue };
            for emitted in d.emits.iter().filter(|e| !bare.contains_key(&(e.ty)())) {
                let emitter = format!(
                    "`{}::{}` (a handler of `{}`, which {} emits)",
                    short_type_name((d.proto_name)()),
                    d.method,
                    short_type_name(cause.name),
                    cause.emitter
                );
                more.push(((emitted.ty)(), Bare { name: (emitted.name)(), emitter }));
            }
        }
        if more.is_empty() {
            break;
        }
        bare.extend(more);
    }
    let mut errors = Vec::new();
    for (p, d) in &handlers {
        let Some(cause) = bare.get(&(d.event)()) else { continue };
        // Every phase: a `before_commit` handler runs in the job's own scope, the others in
        // scopes seeded with its lineage, which is none.
        for (wanted, through) in lineage_reads(graph, *p) {
            errors.push(DiError::LineageUnmet {
                handler: format!("{}::{}", short_type_name((d.proto_name)()), d.method),
                event: short_type_name(cause.name),
                emitter: cause.emitter.clone(),
                wanted,
                through,
            });
        }
    }
    DiError::collect(errors)
}

/// What only a request's scope has that proto `from`'s graph reads (a lineage type without a
/// factory, a proto marked [`seed_only`](crate::ProtoDef::seed_only)), each with the protos it is
/// read through (`Notes → TenantRef<Inboxes>`). A lineage type with a factory is no such thing
/// by itself: its factory's dependencies are followed, as any proto's, so that one built from
/// the request (tegu-http's `RequestId`, from the `RequestHead` only a request is given) is
/// found through them.
fn lineage_reads(graph: &Graph, from: usize) -> Vec<(&'static str, std::sync::Arc<[String]>)> {
    let mut parent: HashMap<usize, usize> = HashMap::from([(from, from)]);
    let mut stack = vec![from];
    let mut found = Vec::new();
    while let Some(p) = stack.pop() {
        let proto = &graph.protos[p];
        let unmet = match proto.travel {
            Some((travel, false)) => Some((travel.type_name)()),
            _ => proto.seed_only.then_some(proto.type_name()),
        };
        if let Some(type_name) = unmet {
            let label = |q: usize| graph.protos[q].label();
            let mut path = Vec::new();
            let mut at = parent[&p];
            while at != from {
                path.push(label(at));
                at = parent[&at];
            }
            path.push(label(from));
            path.reverse();
            found.push((short_type_name(type_name), path.into()));
            continue;
        }
        for resolved in &graph.resolved[p] {
            let next: Vec<usize> = match resolved {
                Resolved::Context(t) => vec![t.proto],
                Resolved::Provider(k) => vec![*k],
                other => other.construction_targets().collect(),
            };
            for n in next {
                if let std::collections::hash_map::Entry::Vacant(v) = parent.entry(n) {
                    v.insert(p);
                    stack.push(n);
                }
            }
        }
    }
    found.sort();
    found
}
