//! The uses of advices an App is built with (`#[intercept]`, `#[transactional]`, crosscuts):
//! each advice registered, and what each use needs of the App (a data source) there.

use std::any::TypeId;

use crate::error::DiError;
use crate::graph::Graph;
use crate::proto::descriptor::ProtoDescriptor;

/// Every advice that an `#[intercept]` in the program names, or that a crosscut needs for a
/// method it selects, must be registered: the method would otherwise panic on its first call
/// (or, for a crosscut, run without it). An App built from roots builds them too. The
/// crosscuts' own rules are checked on the way.
///
/// A use of an advice (`#[intercept]`, `#[transactional]`) is the App's where the App has the
/// use's owner: the impl block's type, known when `#[intercept]` is on the block. An attribute
/// on a method alone cannot name its type (a static in the method cannot use `Self`): its use
/// is taken as the App's where the App takes every proto (the inventory) and has one of the
/// use's module. With the inventory, every use of the program is checked for its advice (the
/// App has every proto), as is every crosscut; a use's needs (a data source) only where it is
/// the App's. Without the inventory, only the uses whose owner the App has.
pub(super) fn check(
    graph: &Graph,
    inactive: &[(ProtoDescriptor, String)],
    roots: &mut Vec<(TypeId, &'static str)>,
    inventory: bool,
) -> Result<(), DiError> {
    // The module of each proto's type: `app::orders` for `app::orders::Orders<T>`.
    let modules: std::collections::HashSet<&str> = graph
        .protos
        .iter()
        .filter_map(|p| p.type_name().split('<').next().and_then(|path| path.rsplit_once("::")).map(|(m, _)| m))
        .collect();
    // One entry per type: a type registered under two names is one proto to a crosscut.
    let providers = |tr| {
        let mut types = std::collections::HashSet::new();
        let targets = graph.provided.get(&tr).into_iter().flatten().map(|t| &graph.protos[t.proto]);
        targets.filter(|d| types.insert(d.type_id())).map(|d| (d.type_id(), d.type_name(), d.label())).collect()
    };
    let mut errors = Vec::new();
    let crosscuts = if inventory { crate::advice::crosscut::check(&providers, &mut errors) } else { Vec::new() };
    let mut seen = std::collections::HashSet::new();
    // Whether a use is one of this App's methods: its owner's, or its module's (see above).
    let ours = |need: &crate::advice::Needed| match need.owner {
        Some(owner) => !graph.of_type(owner).is_empty(),
        None => inventory && modules.contains(need.module),
    };
    let sites = crate::advice::sites().filter(|site| inventory || ours(site));
    for need in sites.chain(crosscuts) {
        if !graph.of_type(need.advice).is_empty() {
            if !roots.is_empty() && seen.insert(need.advice) {
                roots.push((need.advice, need.advice_name));
            }
            if ours(&need) {
                errors.extend(need.needs.iter().filter_map(|dep| unmet(graph, &need, dep)));
            }
            continue;
        }
        errors.push(DiError::AdviceMissing {
            advice: need.advice_name,
            module: need.module,
            method: need.method,
            at: need.at,
            why: match inventory {
                true => why_missing(inactive, need.advice),
                false => format!(
                    "this App is built `without_inventory()` and does not link it: add `.link::<{}>()`",
                    crate::error::short_type(need.advice_name)
                ),
            },
        });
    }
    DiError::collect(errors)
}

/// What a use of an advice needs (`dep`) and the App does not have: no provider, none of the
/// name the use gives, or several and no name.
fn unmet(graph: &Graph, need: &crate::advice::Needed, dep: &crate::proto::Dependency) -> Option<DiError> {
    let providers: Vec<&ProtoDescriptor> =
        graph.provided.get(&(dep.type_id)()).into_iter().flatten().map(|t| &graph.protos[t.proto]).collect();
    let names = || providers.iter().map(|p| format!("\"{}\"", p.name)).collect::<Vec<_>>().join(", ");
    let why = match (dep.qualifier(), providers.len()) {
        (_, 0) => "this App has none".to_owned(),
        (Some(name), _) if providers.iter().any(|p| p.name == name) => return None,
        (Some(_), _) => format!("this App has none of that name (it has {})", names()),
        (None, 1) => return None,
        (None, n) => format!("this App has {n} ({}) and the use names none", names()),
    };
    let named = dep.qualifier().map(|name| format!(" named \"{name}\"")).unwrap_or_default();
    Some(DiError::AdviceNeeds {
        advice: need.advice_name,
        site: format!("method `{}` of module `{}` ({})", need.method, need.module, need.at),
        wanted: (dep.type_name)(),
        why: format!("{named}, but {why}"),
        fix: need.needs_fix,
    })
}

/// Why the App has no proto of type `ty`, which an advice needs: excluded, another profile's,
/// or not registered.
fn why_missing(inactive: &[(ProtoDescriptor, String)], ty: TypeId) -> String {
    inactive.iter().find(|(d, _)| d.type_id() == ty).map_or("it is not registered", |(_, why)| why.as_str()).to_owned()
}
