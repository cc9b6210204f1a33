//! The attribute macros of `di-core`. Depend on `di-core`, which re-exports them
//! (`use di_core::{singleton_proto, context_proto};`); generated code reaches the runtime only
//! through `di_core::__private`.
//!
//! The pipeline follows serde: parse the attribute and the struct into a validated model
//! (`ast`), check rules that need the whole model (`check`), then expand (`expand`, the only
//! file that calls `quote!`). Errors accumulate in a `Ctxt`, so one compile reports them all.
//! `DI_MACROS_DEBUG=1` prints each expansion to stderr.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod symbol;

use proc_macro::TokenStream;

use crate::ast::ProtoScope;

/// Registers a struct as a singleton proto: built once when the App is built.
///
/// See the `di_core` documentation for the options and `#[inject]` fields.
#[proc_macro_attribute]
pub fn singleton_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::proto(args.into(), item.into(), ProtoScope::Singleton).into()
}

/// Registers a struct as a context proto: built at most once per context scope (request).
///
/// See the `di_core` documentation for the options and `#[inject]` fields.
#[proc_macro_attribute]
pub fn context_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::proto(args.into(), item.into(), ProtoScope::Context).into()
}
