//! Cycles: every construction dependency comes before what it builds; the first cycle found is
//! reported with the way out that compiles.

use super::Resolved;
use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Lifetime;

/// The way out of a cycle (`nodes`, the first repeated at the end) that compiles: a context
/// proto may hold another context proto as `ContextRef<T>`, built on first use, which is not a
/// construction dependency; a singleton may not (it outlives every scope), so a cycle of
/// singletons breaks only by moving what both need into a proto of its own.
fn cycle_fix(protos: &[ProtoDescriptor], nodes: &[usize]) -> String {
    let lazy_edge =
        nodes.windows(2).find(|w| protos[w[0]].scope != Lifetime::Singleton && protos[w[1]].scope == Lifetime::Context);
    match lazy_edge {
        Some(w) => {
            let (holder, held) = (&protos[w[0]], crate::error::short_type(protos[w[1]].type_name()));
            format!(
                "break it in `{}`: hold `ContextRef<{held}>` (`AsyncContextRef<{held}>` if it is built asynchronously) where it takes `{held}` by value, as `Arc<{held}>`: it is then built on first use, not before",
                holder.type_name()
            )
        }
        None => "move what they need of each other into a proto of its own, which each of them injects (a singleton cannot hold a lazy reference to another)".to_owned(),
    }
}

/// Orders protos so that every construction dependency comes first; reports the first cycle.
pub(super) fn topo_order(protos: &[ProtoDescriptor], resolved: &[Vec<Resolved>]) -> Result<Vec<usize>, DiError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; protos.len()];
    let mut order = Vec::with_capacity(protos.len());
    // Iterative DFS: (node, next dependency to visit), so 10000-deep chains cannot overflow.
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    // Dependencies are visited in declaration order, so the reported cycle is stable.
    let pending_of = |n: usize| -> Vec<usize> {
        let mut deps: Vec<usize> = resolved[n].iter().flat_map(Resolved::construction_targets).collect();
        deps.reverse();
        deps
    };
    for root in 0..protos.len() {
        if mark[root] != Mark::New {
            continue;
        }
        mark[root] = Mark::Open;
        stack.push((root, pending_of(root)));
        while let Some((node, pending)) = stack.last_mut() {
            let node = *node;
            match pending.pop() {
                Some(next) => match mark[next] {
                    Mark::Done => {}
                    Mark::Open => {
                        let start = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut nodes: Vec<usize> = stack[start..].iter().map(|(n, _)| *n).collect();
                        nodes.push(next);
                        let chain = nodes.iter().map(|&n| protos[n].label_at()).collect();
                        return Err(DiError::Cycle { chain, fix: cycle_fix(protos, &nodes) });
                    }
                    Mark::New => {
                        mark[next] = Mark::Open;
                        stack.push((next, pending_of(next)));
                    }
                },
                None => {
                    mark[node] = Mark::Done;
                    order.push(node);
                    stack.pop();
                }
            }
        }
    }
    Ok(order)
}
