//! Static descriptions of protos: what a type is, what it needs, how it is built.
//!
//! - `kinds.rs`: [`Lifetime`], [`Access`], [`InjectKind`];
//! - `dependency.rs`: [`Dependency`], what a proto needs, and [`Unmarked`], a field it fills
//!   with `Default`;
//! - `provide.rs`: [`Provide`], what it can be injected as;
//! - `factory.rs`: how it is built ([`FactoryFn`], [`AsyncFactoryFn`]);
//! - `descriptor.rs`: [`ProtoDescriptor`], the `const` the macros write;
//! - `registered.rs`: where the macros register it (a link section, or `inventory`);
//! - `def.rs`: [`ProtoDef`], a definition as the builder holds it;
//! - `traits.rs`: [`Proto`] and the scope markers.

pub(crate) mod def;
pub(crate) mod dependency;
pub(crate) mod descriptor;
pub(crate) mod factory;
pub(crate) mod kinds;
pub(crate) mod provide;
pub(crate) mod registered;
pub(crate) mod traits;

pub use def::ProtoDef;
pub use dependency::{Dependency, Unmarked};
pub use kinds::{Access, InjectKind, Lifetime};
pub use traits::{ContextProto, Proto, SingletonProto, TransientProto};
