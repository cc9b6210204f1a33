//! The protos an App built `without_inventory()` leaves out: each with the `.link::<..>()` calls
//! that bring it and what it needs of the others left out, so that one error gives every link
//! to add, not one per `build()`; and the config sections it leaves out, named by the keys they
//! would read.

use std::any::TypeId;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::advice::Needed;
use crate::error::{DiError, short_type};
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::Factory;

/// Why a proto of [`left_out`] is out, as a candidate of `DiError::Inactive`.
pub(super) fn inactive_why(links: &str) -> String {
    format!("registered, but the App is built `without_inventory()`: {links}")
}

/// The registered protos whose type neither `defs` nor `inactive` (left out for a reason of
/// their own: a profile, a condition) holds, and that provide a type the protos of `defs`
/// inject, or one of `advices`, without a provider in `defs`: each with the links that bring
/// it and the left-out protos it needs, transitively (what `defs` provides is not needed
/// again). Nothing is looked at when `defs` injects nothing it lacks.
pub(super) fn left_out(
    defs: &[ProtoDescriptor],
    inactive: &[(ProtoDescriptor, String)],
    advices: &[TypeId],
) -> Vec<(ProtoDescriptor, String)> {
    let held: HashSet<TypeId> = defs.iter().flat_map(|d| d.provided().map(|(ty, _)| ty)).collect();
    let lacked: HashSet<TypeId> = defs
        .iter()
        .flat_map(|d| d.deps.iter().map(|dep| (dep.type_id)()))
        .chain(advices.iter().copied())
        .filter(|ty| !held.contains(ty))
        .collect();
    if lacked.is_empty() {
        return Vec::new();
    }
    // By type: a proto of config instances is in `defs` under its instances' names.
    let had: HashSet<TypeId> = defs.iter().chain(inactive.iter().map(|(d, _)| d)).map(|d| d.type_id()).collect();
    let out: Vec<&'static ProtoDescriptor> =
        crate::proto::registered::all().filter(|r| !had.contains(&r.type_id())).collect();
    let mut providers: HashMap<TypeId, Vec<usize>> = HashMap::new();
    for (i, r) in out.iter().enumerate() {
        for ty in r.provided().map(|(ty, _)| ty) {
            providers.entry(ty).or_default().push(i);
        }
    }
    let wanted: BTreeSet<usize> = lacked.iter().filter_map(|ty| providers.get(ty)).flatten().copied().collect();
    wanted
        .into_iter()
        .map(|at| {
            // Breadth first from `at`: its dependencies that only left-out protos provide.
            let mut chain = vec![at];
            let mut seen = HashSet::from([at]);
            let mut next = 0;
            while let Some(&i) = chain.get(next) {
                next += 1;
                for ty in out[i].deps.iter().map(|dep| (dep.type_id)()).filter(|ty| !held.contains(ty)) {
                    for &j in providers.get(&ty).into_iter().flatten() {
                        if seen.insert(j) {
                            chain.push(j);
                        }
                    }
                }
            }
            let links: String =
                chain.iter().map(|&i| format!(".link::<{}>()", short_type(out[i].type_name()))).collect();
            let what = if chain.len() > 1 { "it and what it needs" } else { "it" };
            (out[at].clone().taken(), format!("link {what} with `{links}`"))
        })
        .collect()
}

/// The `#[intercept]` sites of the protos of `defs` whose advice `defs` does not provide: a
/// site of a method of a proto of `defs`, or on a method alone in the module of one (as with
/// the inventory, taken as the App's).
pub(super) fn advices_lacked(defs: &[ProtoDescriptor]) -> Vec<Needed> {
    let held: HashSet<TypeId> = defs.iter().flat_map(|d| d.provided().map(|(ty, _)| ty)).collect();
    let types: HashSet<TypeId> = defs.iter().map(|d| d.type_id()).collect();
    let modules: HashSet<&str> = defs
        .iter()
        .filter_map(|d| d.type_name().split('<').next().and_then(|path| path.rsplit_once("::")).map(|(m, _)| m))
        .collect();
    crate::advice::sites()
        .filter(|need| match need.owner {
            Some(owner) => types.contains(&owner),
            None => modules.contains(need.module),
        })
        .filter(|need| !held.contains(&need.advice))
        .collect()
}

/// The errors of the sites of `lacked` whose advice is `left_out` (each with its links), found
/// before the graph is built so that they come in the same error as the graph's: otherwise a
/// second `build()` would find them.
pub(super) fn advices_left_out(lacked: Vec<Needed>, left_out: &[(ProtoDescriptor, String)]) -> Vec<DiError> {
    lacked
        .into_iter()
        .filter_map(|need| {
            let (_, links) = left_out.iter().find(|(d, _)| d.type_id() == need.advice)?;
            Some(DiError::AdviceMissing {
                advice: need.advice_name,
                module: need.module,
                method: need.method,
                at: need.at,
                why: format!("this App is built `without_inventory()` and does not link it: {links}"),
            })
        })
        .collect()
}

/// The config sections registered and not in `defs`, which an App built `without_inventory()`
/// leaves out: each prefix with its type, for the keys they would read
/// (`Config::unknown_keys`).
pub(super) fn sections(defs: &[ProtoDescriptor]) -> Vec<(String, &'static str)> {
    let had: HashSet<TypeId> = defs.iter().map(ProtoDescriptor::type_id).collect();
    crate::proto::registered::all()
        .filter(|d| !had.contains(&d.type_id()))
        .filter_map(|d| match &d.factory {
            Factory::Config(section) => Some((section.prefix.to_string(), d.type_name())),
            _ => None,
        })
        .collect()
}
