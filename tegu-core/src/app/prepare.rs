//! What `build()` and `check()` share, as named steps: the protos selected, the configuration
//! read into its sections, the overrides applied, the graph validated, then the checks that
//! need the graph, in order.

use std::any::TypeId;
use std::borrow::Cow;
use std::sync::Arc;

use super::AppBuilder;
use super::builder::Override;
use super::defs::{bring_along, expand_instances, load_config, select_active};
use crate::config::Config;
use crate::error::DiError;
use crate::graph::Graph;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::{Factory, SyncFactory};
use crate::proto::kinds::Lifetime;
use crate::resolver::Resolver;

/// The validated graph and what else `build()` constructs it from.
pub(super) struct Prepared {
    pub(super) graph: Graph,
    pub(super) config: Config,
    pub(super) roots: Vec<(TypeId, &'static str)>,
    /// Which protos `build()` constructs (`None`: every singleton).
    pub(super) reached: Option<Vec<bool>>,
    /// The reloadable sections, if there are any.
    pub(super) live: Option<Arc<crate::reload::Live>>,
}

/// The protos left out of the App (another profile, excluded, not linked), each with why.
type Inactive = Vec<(ProtoDescriptor, String)>;

impl AppBuilder {
    /// The steps `build()` and `check()` share, in order. Runs no factory and no hook. Takes
    /// the protos, overrides and sources out of `self`.
    pub(super) fn prepare(&mut self) -> Result<Prepared, DiError> {
        let mut errors = Vec::new();
        let (defs, mut inactive) = self.select(&mut errors);
        let (config, mut defs, live) = self.read_config(defs, &mut inactive, &mut errors);
        defs = expand_instances(defs, &mut inactive);
        self.apply_overrides(&mut defs, &mut errors);
        self.apply_provider_overrides(&mut defs, &mut errors);
        self.count_providers(&defs, &mut errors);
        let graph = Graph::new(defs, &inactive);
        DiError::collect(errors.into_iter().chain(graph.as_ref().err().cloned()).collect())?;
        let graph = graph?;
        // The checks that need the graph.
        let mut roots = std::mem::take(&mut self.roots);
        super::advices::check(&graph, &inactive, &mut roots, self.inventory)?;
        super::emitters::check(&graph)?;
        crate::scope::lineage::check_types(&graph)?;
        let reached = reached_from(&graph, &roots)?;
        Ok(Prepared { graph, config, roots, reached, live })
    }

    /// The protos the App selects: linked, registered (with the inventory) and brought along;
    /// those of another profile, the excluded ones and, without the inventory, the registered
    /// ones not linked are returned apart, with why.
    fn select(&mut self, errors: &mut Vec<DiError>) -> (Vec<ProtoDescriptor>, Inactive) {
        let mut defs: Vec<ProtoDescriptor> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let registered = self.inventory.then(crate::proto::registered::all).into_iter().flatten();
        for descriptor in std::mem::take(&mut self.linked).into_iter().chain(registered) {
            if seen.insert((descriptor.type_id(), descriptor.name.clone())) {
                defs.push(descriptor.clone().taken());
            }
        }
        defs.extend(std::mem::take(&mut self.defs));
        bring_along(&mut defs);
        let profile = self.config.profile.clone();
        let mut inactive = select_active(&mut defs, profile.as_deref(), &self.excluded, errors);
        if !self.inventory {
            let lacked = super::left_out::advices_lacked(&defs);
            let advices: Vec<TypeId> = lacked.iter().map(|need| need.advice).collect();
            let left_out = super::left_out::left_out(&defs, &inactive, &advices);
            errors.extend(super::left_out::advices_left_out(lacked, &left_out));
            inactive.extend(left_out.into_iter().map(|(def, links)| (def, super::left_out::inactive_why(&links))));
        }
        (defs, inactive)
    }

    /// Loads the configuration, reads each section into its proto, checks the keys against
    /// what the protos read, and installs the reloadable sections (their protos replaced by
    /// `ConfigRef`s): the configuration, the protos, and the live configuration if any.
    fn read_config(
        &mut self,
        mut defs: Vec<ProtoDescriptor>,
        inactive: &mut Inactive,
        errors: &mut Vec<DiError>,
    ) -> (Config, Vec<ProtoDescriptor>, Option<Arc<crate::reload::Live>>) {
        let overrides = &self.overrides;
        let overridden = |ty: TypeId, name: &str| overridden(overrides, ty, name);
        let is_live =
            |d: &ProtoDescriptor| matches!(&d.factory, Factory::Config(c) if c.live.is_some() && !c.instances);
        let sources = defs.iter().any(is_live).then(|| self.config.clone());
        let (known, templates) = known_prefixes(&self.config.known, &defs, inactive, overridden);
        let config = match std::mem::take(&mut self.config).load() {
            Ok(config) => config,
            // Sections are not read from a broken source: each would only repeat its error.
            Err(e) => {
                errors.extend(e);
                return (Config::default(), defs, None);
            }
        };
        let mut found = Vec::new();
        let reads = crate::config::recording(|| {
            found = load_config(&mut defs, &config, overridden, errors);
            for def in defs.iter().filter(|d| !overridden(d.type_id(), &d.name)) {
                def.config_reads.iter().for_each(|r| r.read(&config));
            }
        });
        let left_out = if self.inventory { Vec::new() } else { super::left_out::sections(&defs) };
        errors.extend(config.unknown_keys(&reads, &known, &templates, &left_out));
        let Some(sources) = sources.filter(|_| !found.is_empty()) else { return (config, defs, None) };
        for (def, _) in &found {
            let why = format!("a reloadable section: singletons hold `ConfigRef<{}>`", def.type_name());
            inactive.push((def.clone(), why));
        }
        let (installed, protos) = crate::reload::install(sources, &config, found);
        defs.extend(protos);
        (config, defs, Some(installed))
    }

    /// Each `override_object`: the protos of its type (and name) built from its value, with no
    /// dependencies and no hooks.
    fn apply_overrides(&mut self, defs: &mut [ProtoDescriptor], errors: &mut Vec<DiError>) {
        for o in std::mem::take(&mut self.overrides) {
            let mut hit = false;
            for def in
                defs.iter_mut().filter(|d| d.type_id() == o.type_id && o.name.as_deref().is_none_or(|n| d.name == n))
            {
                let value = o.value.clone();
                def.factory = Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
                def.deps = Cow::Borrowed(&[]);
                def.init = None;
                def.complete = None;
                def.destroy = None;
                hit = true;
            }
            if !hit {
                errors.push(DiError::OverrideUnknown { type_name: o.type_name });
            }
        }
    }

    /// Each `override_provider`: what provides its type (under its name) is replaced by the
    /// fake, one per object name.
    fn apply_provider_overrides(&mut self, defs: &mut Vec<ProtoDescriptor>, errors: &mut Vec<DiError>) {
        for o in std::mem::take(&mut self.provider_overrides) {
            let provides = |d: &ProtoDescriptor| d.provides_type(o.type_id);
            let hit = |d: &ProtoDescriptor| provides(d) && o.name.as_deref().is_none_or(|n| d.name == n);
            let mut names: Vec<(Cow<'static, str>, Lifetime)> =
                defs.iter().filter(|d| hit(d)).map(|d| (d.name.clone(), d.scope)).collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            names.dedup_by(|a, b| a.0 == b.0);
            if names.is_empty() {
                let mut providers: Vec<String> =
                    defs.iter().filter(|d| provides(d)).map(ProtoDescriptor::label).collect();
                providers.sort();
                errors.push(DiError::OverrideNoProvider { wanted: o.type_name, name: o.name, providers });
                continue;
            }
            // A replaced proto that provides other traits too stays, for those: only its
            // `U` goes to the fake. One that provides nothing else is gone, and so is one whose
            // own type is `U` (its own type stays its first entry, which lookups by type use).
            defs.retain_mut(|d| {
                if !hit(d) {
                    return true;
                }
                let (own, faked) = (d.type_id(), o.type_id);
                let others = |p: &crate::proto::provide::Provide| (p.type_id)() != own && (p.type_id)() != faked;
                let keeps_others = own != faked && d.provides.iter().any(others);
                d.provides.to_mut().retain(|p| (p.type_id)() != faked);
                keeps_others
            });
            defs.extend(names.into_iter().map(|(name, scope)| (o.fake)(name, scope)));
        }
    }

    /// Each `expect_providers`: at least that many protos provide the type.
    fn count_providers(&self, defs: &[ProtoDescriptor], errors: &mut Vec<DiError>) {
        for &(ty, wanted, expected) in &self.expected {
            let found: Vec<String> = defs.iter().filter(|d| d.provides_type(ty)).map(ProtoDescriptor::label).collect();
            if found.len() < expected {
                errors.push(DiError::ExpectedProviders { wanted, expected, found });
            }
        }
    }
}

/// Whether an `override_object` replaces the proto of type `ty` named `name`.
fn overridden(overrides: &[Override], ty: TypeId, name: &str) -> bool {
    overrides.iter().any(|o| o.type_id == ty && o.name.as_deref().is_none_or(|n| n == name))
}

/// The prefixes under which a key is not unknown although no section here reads it (the
/// `config_known` ones, a section or reader of a proto that is overridden or not selected, the
/// keys of jobs), and the prefixes of the multi-instance sections (one table per instance).
fn known_prefixes(
    declared: &[String],
    defs: &[ProtoDescriptor],
    inactive: &Inactive,
    overridden: impl Fn(TypeId, &str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let mut known = declared.to_vec();
    let templates: Vec<String> = defs
        .iter()
        .filter_map(|d| match &d.factory {
            Factory::Config(section) if section.instances => Some(section.prefix.to_string()),
            _ => None,
        })
        .collect();
    let replaced = defs.iter().filter(|d| overridden(d.type_id(), &d.name));
    for def in replaced.chain(inactive.iter().map(|(d, _)| d)) {
        if let Factory::Config(section) = &def.factory {
            known.push(section.prefix.to_string());
        }
        known.extend(def.config_reads.iter().map(|r| r.prefix().to_owned()));
    }
    #[cfg(feature = "schedule")]
    known.extend(crate::schedule::config_keys().map(str::to_owned));
    (known, templates)
}

/// Whether the App has singleton `p` for its features (its handlers, its jobs): built by
/// `build()` (`reached`), or lazy and buildable later (with roots, only what they reach, which
/// `reached` already says).
pub(super) fn available(graph: &Graph, roots: &[(TypeId, &'static str)], reached: Option<&[bool]>, p: usize) -> bool {
    let def = &graph.protos[p];
    def.scope == Lifetime::Singleton && (reached.is_none_or(|r| r[p]) || (def.lazy && roots.is_empty()))
}

/// Which singletons `build()` constructs: with roots, those the roots reach (by value, and
/// through the context and transient protos they reach by reference); else every singleton
/// but the lazy ones no eager proto reaches. `None`: all of them.
fn reached_from(graph: &Graph, roots: &[(TypeId, &'static str)]) -> Result<Option<Vec<bool>>, DiError> {
    let lazy = graph.protos.iter().any(|p| p.lazy);
    if roots.is_empty() && !lazy {
        return Ok(None);
    }
    let mut reached = vec![false; graph.protos.len()];
    let mut stack = Vec::new();
    for &(ty, wanted) in roots {
        let targets = graph.provided.get(&ty).filter(|t| !t.is_empty()).ok_or_else(|| DiError::NotFound {
            wanted,
            name: None,
            near: graph.near(wanted, None),
        })?;
        stack.extend(targets.iter().map(|t| t.proto));
    }
    if roots.is_empty() {
        stack.extend(
            (0..graph.protos.len()).filter(|&p| {
                graph.protos[p].scope == crate::proto::kinds::Lifetime::Singleton && !graph.protos[p].lazy
            }),
        );
    }
    while let Some(p) = stack.pop() {
        if std::mem::replace(&mut reached[p], true) {
            continue;
        }
        for dep in &graph.resolved[p] {
            match dep {
                // Roots reach what they hold references to; without roots, what builds at start
                // is what eager singletons take by value (a lazy one a context proto takes is
                // built when a scope builds that).
                crate::graph::Resolved::Context(crate::graph::Target { proto: c, .. })
                | crate::graph::Resolved::Provider(c)
                    if !roots.is_empty() =>
                {
                    stack.push(*c)
                }
                other => stack.extend(other.construction_targets()),
            }
        }
    }
    Ok(Some(reached))
}
