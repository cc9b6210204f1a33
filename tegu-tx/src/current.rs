//! Which transaction is current: [`Transactions`] asks the calling task's methods in progress
//! (`tx::innermost`), then the context scope (`TxScope`).

use std::sync::Arc;

use tegu_core::{ContextRef, singleton_proto};

use crate::scope::TxScope;
use crate::tx::{Innermost, Owner, Tx, innermost};

/// The App's transactions: which one is current for a data source. What an adapter asks
/// before it runs a statement (tegu-sqlx's `Database::conn`), and what the advice
/// [`Transactional`](crate::Transactional) joins. Inject it as `Arc<Transactions>`.
#[singleton_proto]
pub struct Transactions {
    #[inject]
    pub(crate) scope: ContextRef<TxScope>,
    /// Tells this App's transactions from another's of the same data source name, when a
    /// task runs the methods of two Apps.
    pub(crate) owner: Owner,
}

impl Transactions {
    /// The current transaction of data source `source`: the innermost one of the calling
    /// task's `#[transactional]` methods (the one it began or joined), else the current
    /// scope's (begun by a method before, and not yet ended). `None` when there is none, or
    /// the innermost method is `never`: the caller works outside any transaction (each
    /// statement committed on its own).
    ///
    /// A method keeps the transaction it began or joined until it returns, ended or not: once
    /// it is rolled back (another method of the request that shares it failed), its next use
    /// is an error, never a statement outside any transaction.
    pub fn current(&self, source: &str) -> Option<Arc<Tx>> {
        match innermost(self.owner, source) {
            Innermost::Tx(tx) => Some(tx),
            Innermost::Outside => None,
            Innermost::None => self.scope.built()?.find(source),
        }
    }
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}
