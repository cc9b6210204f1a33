//! The proto attributes (`#[singleton_proto]`, `#[context_proto]`, `#[transient_proto]`,
//! `#[config_proto]`, and `#[http_controller]`'s proto part), in serde_derive's stages:
//!
//! - `attr.rs`: the attribute's options and each field's `#[inject(..)]`;
//! - `ast.rs`: the model of the struct or the constructor's impl block;
//! - `check.rs`: the rules a model must keep, each a function;
//! - `expand.rs`: the descriptor, factory and registration the model becomes.

pub(crate) mod ast;
pub(crate) mod attr;
pub(crate) mod check;
pub(crate) mod expand;
