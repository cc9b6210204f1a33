//! A connection for a statement: the current transaction's, or the pool's.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use tegu_tx::TxGuard;

/// What [`Database::conn`](crate::Database::conn) gives: the connection of the current
/// transaction (locked for this use) or, outside any, one of the pool's (each statement
/// committed on its own). Dereferences to the driver's connection, which sqlx's queries run
/// on: `query.execute(&mut *conn)`.
pub struct Conn<DB: sqlx::Database>(pub(crate) Inner<DB>);

pub(crate) enum Inner<DB: sqlx::Database> {
    Tx(TxGuard<DB::Connection>),
    Pool(PoolConnection<DB>),
}

impl<DB: sqlx::Database> Conn<DB> {
    /// Whether this is a transaction's connection.
    pub fn in_transaction(&self) -> bool {
        matches!(self.0, Inner::Tx(_))
    }
}

impl<DB: sqlx::Database> Deref for Conn<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        match &self.0 {
            Inner::Tx(guard) => guard,
            Inner::Pool(conn) => conn,
        }
    }
}

impl<DB: sqlx::Database> DerefMut for Conn<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        match &mut self.0 {
            Inner::Tx(guard) => guard,
            Inner::Pool(conn) => conn,
        }
    }
}

impl<DB: sqlx::Database> std::fmt::Debug for Conn<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("in_transaction", &self.in_transaction()).finish()
    }
}
