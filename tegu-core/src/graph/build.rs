//! `Graph::new`: the graph's checks run in order, each a file of its own, then its tables
//! filled. The errors of the first group (declarations and dependencies) are reported
//! together; each later pass needs the one before it to have passed.

use super::levels::Levels;
use super::providers::Providers;
use super::{Graph, fields, options, order, resolve, tables};
use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;

impl Graph {
    /// Validates `protos`. `inactive` are the protos left out (another profile, excluded), with
    /// why: a dependency only they provide is reported as such.
    pub(crate) fn new(
        mut protos: Vec<ProtoDescriptor>,
        inactive: &[(ProtoDescriptor, String)],
    ) -> Result<Graph, DiError> {
        protos.iter_mut().for_each(ProtoDescriptor::arm);
        let mut errors = options::check(&protos);
        let (by_type, providers) = Providers::index(&protos);
        let resolved = resolve::all(&protos, &providers, inactive, &mut errors);
        errors.extend(fields::uninjected(&protos, &providers));
        DiError::collect(errors)?;
        let order = order::topo_order(&protos, &resolved)?;
        let levels = Levels::of(&protos, &resolved, &order);
        DiError::collect(levels.sync_refs_to_async(&protos, &resolved))?;
        let Providers { by_type: provided, by_name } = providers;
        drop(by_name); // it borrows the names of `protos`
        Ok(tables::graph(protos, resolved, levels, by_type, provided))
    }
}
