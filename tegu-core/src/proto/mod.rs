//! Static descriptions of protos: what a type is, what it needs, how it is built (each child's
//! `//!` line says what it holds).

pub(crate) mod def;
pub(crate) mod dependency;
pub(crate) mod descriptor;
pub(crate) mod factory;
pub(crate) mod kinds;
pub(crate) mod provide;
pub(crate) mod registered;
pub(crate) mod traits;

pub use dependency::{Dependency, Unmarked};
pub use descriptor::ProtoDef;
pub use kinds::{Access, InjectKind, Lifetime};
pub use traits::{ContextProto, Proto, SingletonProto, TransientProto};
