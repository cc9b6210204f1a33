//! Context scopes: the task-local that carries the current request's objects.
//!
//! - `handle.rs`: the task-local handle, the accessors behind `ContextRef`, `spawn`.
//! - `table.rs`: the scope's shared table and the construction of its objects.
//! - `end.rs`: completion, destruction, and the futures that run a scope.
//! - `owned.rs`: a scope owned by its task, until a second task needs it.
//! - `deferred.rs`: what a scope holds until its completion phase's end (events, for the bus).
//! - `hold.rs`: holding a scope open past its work.
//! - `spare.rs`: a thread's spare task tables, reused from one scope to the next.
//!
//! Files of the kernel import the file that defines a name, not these re-exports (see
//! `docs/decisions.md`, "di-core in floors").

pub(crate) mod end;
pub(crate) mod handle;
pub(crate) mod deferred;
pub(crate) mod hold;
pub(crate) mod owned;
pub(crate) mod spare;
pub(crate) mod table;

pub use end::complete_scope;
pub use handle::{fail_scope, in_scope, scope_failed, spawn, spawn_blocking};
pub use hold::{ScopeHold, hold_scope};
