//! Attribute and option names, in one place (serde's `symbol.rs`).

pub(crate) const INJECT: &str = "inject";
pub(crate) const NAME: &str = "name";
pub(crate) const PROVIDES: &str = "provides";
pub(crate) const ACCESS: &str = "access";
pub(crate) const INIT: &str = "init";
pub(crate) const DESTROY: &str = "destroy";
pub(crate) const CRATE: &str = "crate";
pub(crate) const PUBLIC: &str = "public";
pub(crate) const PRIVATE: &str = "private";

pub(crate) const PROTO_OPTIONS: &str = "`name`, `provides`, `access`, `init`, `destroy` or `crate`";
