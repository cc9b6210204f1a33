//! What happens to the protos before the graph: the profiles and exclusions applied, what they
//! bring along added, the configuration sections read into protos, and the `instances_of`
//! templates expanded.

use std::any::TypeId;
use std::borrow::Cow;
use std::sync::Arc;

use crate::config::Config;
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::{ConfigDef, Factory, SyncFactory};
use crate::proto::kinds::InjectKind;
use crate::resolver::Resolver;

/// Moves the protos of another profile, and the excluded ones, out of `defs`: returned with
/// why, for the errors of the dependencies that only they would provide.
pub(super) fn select_active(
    defs: &mut Vec<ProtoDescriptor>,
    profile: Option<&str>,
    excluded: &[(TypeId, &'static str)],
    errors: &mut Vec<DiError>,
) -> Vec<(ProtoDescriptor, String)> {
    for &(ty, type_name) in excluded {
        if !defs.iter().any(|d| d.type_id() == ty) {
            errors.push(DiError::ExcludeUnknown { type_name });
        }
    }
    let mut inactive = Vec::new();
    defs.retain(|def| {
        let why = if excluded.iter().any(|&(ty, _)| ty == def.type_id()) {
            "excluded by `AppBuilder::exclude`".to_owned()
        } else {
            match def.profile.as_deref() {
                Some(p) if Some(p) != profile => {
                    format!("registered for profile \"{p}\" only: activate it with `AppBuilder::profile(\"{p}\")`")
                }
                _ => return true,
            }
        };
        inactive.push((def.clone(), why));
        false
    });
    inactive
}

/// Adds the protos that `defs` bring along ([`ProtoDescriptor::also`]), once each by type and name, and
/// none the App has already; those brought may bring more. One set of what the App has, made
/// at the first proto that brings one: an App without them pays a walk over its protos.
pub(super) fn bring_along(defs: &mut Vec<ProtoDescriptor>) {
    let mut have: Option<std::collections::HashSet<(TypeId, Cow<'static, str>)>> = None;
    let mut at = 0;
    while at < defs.len() {
        if !defs[at].also.is_empty() {
            let also = defs[at].also.clone();
            let have = have.get_or_insert_with(|| defs.iter().map(|d| (d.type_id(), d.name.clone())).collect());
            for make in also.iter() {
                // Declared where the proto that brings it is.
                let brought = ProtoDescriptor { site: defs[at].site, ..make().0.taken() };
                if have.insert((brought.type_id(), brought.name.clone())) {
                    defs.push(brought);
                }
            }
        }
        at += 1;
    }
}

/// Reads every config section (but those overridden): a section becomes a proto holding its
/// value; a multi-instance one, one proto per table under its prefix (appended; an overridden
/// instance is left for its override); a reloadable one leaves `defs` and is returned with its
/// value, for the live configuration. Works in place: a def is a few hundred bytes, and an
/// App may have tens of thousands.
pub(super) fn load_config(
    defs: &mut Vec<ProtoDescriptor>,
    config: &Config,
    overridden: impl Fn(TypeId, &str) -> bool,
    errors: &mut Vec<DiError>,
) -> Vec<(ProtoDescriptor, AnyArc)> {
    let value_factory =
        |value: AnyArc| Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
    let mut instances = Vec::new();
    let mut templates = false;
    let mut live = Vec::new();
    for def in defs.iter_mut() {
        let Factory::Config(section) = &def.factory else { continue };
        if !section.instances {
            if !overridden(def.type_id(), &def.name) {
                match (section.load)(config, &section.prefix, def.type_name()) {
                    Ok(value) if section.live.is_some() => live.push((def.clone(), value)),
                    Ok(value) => def.factory = value_factory(value),
                    // A reloadable section that fails still gets its `ConfigRef` (the build
                    // fails before any factory runs), so that its users show no second error.
                    Err(e) if section.live.is_some() => {
                        errors.push(e);
                        live.push((def.clone(), Arc::new(()) as AnyArc));
                    }
                    Err(e) => errors.push(e),
                }
            }
            continue;
        }
        templates = true;
        let names = match config.instance_names(&section.prefix, def.type_name()) {
            Ok(names) => names,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for name in names {
            let mut instance = def.clone();
            if !overridden(def.type_id(), &name) {
                match (section.load)(config, &format!("{}.{name}", section.prefix), def.type_name()) {
                    Ok(value) => instance.factory = value_factory(value),
                    Err(e) => errors.push(e),
                }
            }
            instance.name = Cow::Owned(name);
            instances.push(instance);
        }
    }
    // Templates leave (their instances replace them), and so do the reloadable sections that
    // are not overridden (each went to `live`, and its `ConfigRef` replaces it).
    if templates || !live.is_empty() {
        let leaves =
            |d: &ProtoDescriptor, c: &ConfigDef| c.instances || (c.live.is_some() && !overridden(d.type_id(), &d.name));
        defs.retain(|d| !matches!(&d.factory, Factory::Config(c) if leaves(d, c)));
    }
    defs.extend(instances);
    live
}

/// Replaces each `instances_of` template with one proto per proto of the type it follows,
/// named like it, whose unqualified dependencies on that type name it. A template may follow
/// another template's type: those are expanded first (a cycle of templates expands to nothing).
pub(super) fn expand_instances(
    defs: Vec<ProtoDescriptor>,
    inactive: &mut Vec<(ProtoDescriptor, String)>,
) -> Vec<ProtoDescriptor> {
    if defs.iter().all(|d| d.instances_of.is_none()) {
        return defs;
    }
    let (mut templates, mut out): (Vec<ProtoDescriptor>, Vec<ProtoDescriptor>) =
        defs.into_iter().partition(|d| d.instances_of.is_some());
    loop {
        // The templates whose followed type no other pending template produces.
        let ready: Vec<ProtoDescriptor>;
        (ready, templates) = {
            let pending: Vec<TypeId> = templates.iter().map(|t| t.type_id()).collect();
            templates.into_iter().partition(|t| t.instances_of.is_some_and(|of| !pending.contains(&(of.type_id)())))
        };
        if ready.is_empty() {
            for template in templates {
                let why = "its `instances_of` chain comes back to its own type".to_owned();
                inactive.push((template, why));
            }
            break;
        }
        for template in ready {
            let Some(of) = template.instances_of else { continue };
            let (of, of_name) = ((of.type_id)(), (of.type_name)());
            let mut names: Vec<String> = out.iter().filter(|d| d.type_id() == of).map(|d| d.name.to_string()).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                let why = format!(
                    "one instance per `{of_name}`, and there is none (for a config section: no table under its prefix)"
                );
                inactive.push((template.clone(), why));
            }
            for name in names {
                let mut instance = template.clone();
                instance.instances_of = None;
                for dep in instance.deps.to_mut().iter_mut() {
                    let follows = matches!(dep.kind, InjectKind::Arc | InjectKind::Optional);
                    if follows && (dep.type_id)() == of && dep.qualifier.is_none() {
                        dep.qualifier = Some(Cow::Owned(name.clone()));
                    }
                }
                instance.name = Cow::Owned(name);
                out.push(instance);
            }
        }
    }
    out
}
