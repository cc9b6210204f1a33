//! The proto attributes (`#[singleton_proto]`, `#[context_proto]`, `#[transient_proto]`,
//! `#[config_proto]`, and `#[http_controller]`'s proto part), in serde_derive's stages: `attr`
//! (the options), `ast` (the model), `check` (its rules), `expand` (what it becomes).

pub(crate) mod ast;
pub(crate) mod attr;
pub(crate) mod check;
pub(crate) mod expand;
