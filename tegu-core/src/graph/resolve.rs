//! Each dependency resolved once: the providers it chooses (by type, or by object name), each
//! checked for access and lifetime, then what its kind of injection takes of them.

use super::providers::{Named, Providers};
use super::{Resolved, Target, access, captive, handles, sorted};
use crate::error::DiError;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::InjectKind;

/// Every proto's dependencies resolved; the errors of those that are not, in `errors`.
pub(super) fn all(
    protos: &[ProtoDescriptor],
    providers: &Providers<'_>,
    inactive: &[(ProtoDescriptor, String)],
    errors: &mut Vec<DiError>,
) -> Vec<Vec<Resolved>> {
    protos
        .iter()
        .map(|p| {
            p.deps
                .iter()
                .filter_map(|dep| {
                    match resolve(protos, providers, p, dep).map_err(|e| inactive_only(e, dep, inactive)) {
                        Ok(r) => Some(r),
                        Err(e) => {
                            errors.push(e);
                            None
                        }
                    }
                })
                .collect()
        })
        .collect()
}

/// `p`'s dependency `dep`.
fn resolve(
    protos: &[ProtoDescriptor],
    providers: &Providers<'_>,
    p: &ProtoDescriptor,
    dep: &Dependency,
) -> Result<Resolved, DiError> {
    let chosen = choose(protos, providers, p, dep)?;
    for t in &chosen {
        access::check(p, dep, &protos[t.proto])?;
        captive::check(p, dep, &protos[t.proto])?;
    }
    let one = || one(protos, p, dep, &chosen);
    Ok(match dep.kind {
        InjectKind::Arc => Resolved::One(one()?),
        InjectKind::Optional if chosen.is_empty() => Resolved::Maybe(None),
        InjectKind::Optional => Resolved::Maybe(Some(one()?)),
        InjectKind::All => Resolved::Many(chosen),
        InjectKind::Keyed => {
            // By name: two providers of one name would make `get(name)` pick one silently.
            if let Some(w) = chosen.windows(2).find(|w| protos[w[0].proto].name == protos[w[1].proto].name) {
                return Err(DiError::Ambiguous {
                    wanted: dep.type_name(),
                    by: p.label_of(dep),
                    candidates: w.iter().map(|t| protos[t.proto].label()).collect(),
                });
            }
            Resolved::Many(chosen)
        }
        InjectKind::Provider => {
            let t = one()?;
            handles::provider(p, dep, t.proto, &protos[t.proto])?
        }
        InjectKind::ContextRef => {
            let t = one()?;
            handles::context_ref(p, dep, &protos[t.proto])?;
            Resolved::Context(t)
        }
    })
}

/// The providers `dep` may take: of its type, or of its type and object name.
fn choose(
    protos: &[ProtoDescriptor],
    providers: &Providers<'_>,
    p: &ProtoDescriptor,
    dep: &Dependency,
) -> Result<Vec<Target>, DiError> {
    let all: &[Target] = providers.by_type.get(&(dep.type_id)()).map_or(&[], Vec::as_slice);
    let chosen: Vec<Target> = match &dep.qualifier {
        None => all.to_vec(),
        Some(q) => {
            let named = providers.by_name.get(&((dep.type_id)(), &**q)).map_or_else(Vec::new, Named::to_vec);
            if named.is_empty() && !all.is_empty() {
                return Err(DiError::UnknownQualifier {
                    wanted: dep.type_name(),
                    qualifier: q.to_string(),
                    by: p.label_of(dep),
                    available: sorted(protos, all.to_vec())
                        .iter()
                        .map(|t| format!("\"{}\"", protos[t.proto].name))
                        .collect(),
                });
            }
            named
        }
    };
    // Registration order is arbitrary (inventory's, the builder's): every list that shows is
    // sorted, by the protos' `order`, then object name, then type name. Only here, on what a
    // dependency chose: sorting every provider list of the App up front cost a third of
    // `build()` at 10000 protos.
    Ok(if chosen.len() > 1 { sorted(protos, chosen) } else { chosen })
}

/// The one provider a dependency that takes one has: none is `Missing`, several `Ambiguous`.
fn one(
    protos: &[ProtoDescriptor],
    p: &ProtoDescriptor,
    dep: &Dependency,
    chosen: &[Target],
) -> Result<Target, DiError> {
    match chosen {
        [] => Err(DiError::Missing { wanted: dep.type_name(), by: p.label_of(dep) }),
        [t] => Ok(*t),
        many => Err(DiError::Ambiguous {
            wanted: dep.type_name(),
            by: p.label_of(dep),
            candidates: many.iter().map(|t| protos[t.proto].label()).collect(),
        }),
    }
}

/// A dependency with no provider (`Missing`, or no provider of that name) that a left-out
/// proto would provide: say which, and why it is left out.
fn inactive_only(e: DiError, dep: &Dependency, inactive: &[(ProtoDescriptor, String)]) -> DiError {
    let (DiError::Missing { wanted, ref by } | DiError::UnknownQualifier { wanted, ref by, .. }) = e else { return e };
    let candidates: Vec<String> = inactive
        .iter()
        .filter(|(def, _)| {
            def.provides_type((dep.type_id)())
                // A template's instances would take any name.
                && (def.instances_of.is_some() || dep.qualifier.as_deref().is_none_or(|q| def.name == q))
        })
        .map(|(def, why)| format!("{} ({why})", def.label()))
        .collect();
    if candidates.is_empty() { e } else { DiError::Inactive { wanted, by: by.clone(), inactive: candidates } }
}
