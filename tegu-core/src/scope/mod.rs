//! Context scopes: one per request (or per job, per event handler), holding the objects of the
//! context protos it reaches, built on first use and destroyed when it ends.
//!
//! [`App::run_in_context`](crate::App::run_in_context) runs a future in a new scope;
//! [`App::scope`](crate::App::scope) prepares one seeded with objects ([`ScopeBuilder`]). Inside
//! it, [`ContextRef`](crate::ContextRef) resolves the scope's object, [`spawn`] and
//! [`spawn_blocking`] carry the scope into other tasks, [`hold_scope`] keeps it open past its
//! work (a streamed body), and [`fail_scope`], [`complete_scope`] and [`scope_failed`] steer
//! and read its end: completion hooks, the output, background tasks, destroy hooks.
//!
//! # Examples
//!
//! ```
//! use tegu_core::{App, DiError, ProtoDef, scope};
//!
//! struct RequestId(u32);
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
//! let app = App::builder().register(ProtoDef::context::<RequestId>(|_| Ok(RequestId(7)))).build().await?;
//! let (id, spawned_in_scope) = app
//!     .run_in_context(async {
//!         let id = app.get_object::<RequestId>()?.0;
//!         // A task spawned with `scope::spawn` runs in the same scope.
//!         let spawned = scope::spawn(async { scope::in_scope() }).await.expect("not cancelled");
//!         Ok::<_, DiError>((id, spawned))
//!     })
//!     .await?;
//! assert_eq!((id, spawned_in_scope), (7, true));
//! assert!(!scope::in_scope());
//! # Ok(()) }
//! ```

// Each child's `//!` line says what it holds. Files of the kernel import the file that defines
// a name, not these re-exports (`docs/ARCHITECTURE.md`).

pub(crate) mod carry;
pub(crate) mod deferred;
pub(crate) mod end;
pub(crate) mod handle;
pub(crate) mod hold;
pub(crate) mod lineage;
pub(crate) mod owned;
pub(crate) mod spare;
pub(crate) mod table;

pub use end::complete_scope;
pub use handle::{fail_scope, in_scope, scope_failed, spawn, spawn_blocking};
pub use hold::{ScopeHold, hold_scope};

// A scope prepared before it runs, and the work held open past it.
pub use crate::app::{AppHold, ContextSlot, ScopeBuilder};
// The proxy forms a scope's objects are reached through.
pub use crate::context_ref::RefTarget;
