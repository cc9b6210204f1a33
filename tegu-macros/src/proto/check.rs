//! Rules that need the whole model, one small function each.

use crate::ctxt::Ctxt;
use crate::proto::ast::{Body, Kind, ProtoItem, is_dyn};
use crate::proto::attr::ProtoScope;

pub(crate) fn check(cx: &Ctxt, model: &ProtoItem) {
    no_generics(cx, model);
    named_fields(cx, model);
    provider_names_a_type(cx, model);
    complete_needs_a_context_proto(cx, model);
    config_has_a_prefix(cx, model);
    config_injects_nothing(cx, model);
    transient_is_built_in_place(cx, model);
    lazy_is_built_synchronously(cx, model);
}

/// A lazy singleton is built by the first synchronous `get_object` or factory that needs it.
fn lazy_is_built_synchronously(cx: &Ctxt, model: &ProtoItem) {
    let Some(lazy) = &model.attr.lazy else { return };
    if model.attr.init.is_some() || model.ctor().is_some_and(|c| c.is_async) {
        cx.error_spanned_by(
            lazy,
            "a lazy singleton is built on first use, by a synchronous `get_object` or factory: it cannot have an init hook or an async constructor; drop `lazy`, or do the work synchronously",
        );
    }
}

/// A transient is built where it is asked for, synchronously, and not kept: no async
/// constructor (hooks are refused as unknown options).
fn transient_is_built_in_place(cx: &Ctxt, model: &ProtoItem) {
    if let (ProtoScope::Transient, Some(ctor)) = (model.scope, model.ctor())
        && ctor.is_async
    {
        cx.error_spanned_by(
                &ctor.ident,
                "a transient is built where it is asked for, synchronously: its constructor cannot be `async`; make it a context proto (one per request) if it needs to await",
            );
    }
}

fn complete_needs_a_context_proto(cx: &Ctxt, model: &ProtoItem) {
    if let (Some(method), true) = (&model.attr.complete, model.scope.is_singleton()) {
        cx.error_spanned_by(
            method,
            format!(
                "`complete` is a hook of `#[context_proto]`, run when a context scope's work is done; a {} struct is built once: do this work in its `destroy` hook, or in a context proto",
                model.scope.attribute()
            ),
        );
    }
}

fn no_generics(cx: &Ctxt, model: &ProtoItem) {
    let (generics, what) = match &model.body {
        Body::Struct { item, .. } => (&item.generics, "generic structs"),
        Body::Impl { item, .. } => (&item.generics, "generic `impl` blocks"),
    };
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        cx.error_spanned_by(
            generics,
            format!(
                "{} does not support {what}; register each instantiation by hand with `tegu_core::ProtoDef`",
                model.scope.attribute()
            ),
        );
    }
}

fn named_fields(cx: &Ctxt, model: &ProtoItem) {
    if let (Body::Struct { item, is_tuple: true, .. }, false) = (&model.body, model.scope == ProtoScope::Config) {
        cx.error_spanned_by(
            &item.fields,
            format!(
                "{} needs a struct with named fields (or a unit struct), not a tuple struct; or annotate an `impl` block with its constructor",
                model.scope.attribute()
            ),
        );
    }
}

/// A `ContextRef<dyn Trait>` is fine (the trait declared a `RefTarget`); a `Provider` builds one
/// proto, named by its own type.
fn provider_names_a_type(cx: &Ctxt, model: &ProtoItem) {
    for (_, inject) in model.injected() {
        if inject.kind == Kind::Provider && is_dyn(&inject.target) {
            cx.error_spanned_by(
                &inject.target,
                "`Provider` names the transient proto's own type, not a trait object: hold `Provider<TheTransient>`",
            );
        }
    }
}

/// The error of a field without `#[inject]` that holds trait objects (`Arc<dyn ..>`, and an
/// `Option` or a `Vec` of them), which only the container fills: `None` for the others, whose
/// value `__private::FieldProbe` chooses by type (an error where the container fills it, or
/// where the type has no `Default`).
pub(crate) fn uninjected_form(field: &crate::proto::ast::Field) -> Option<String> {
    let (kind, target) = crate::proto::ast::classify(&field.ty)?;
    if !is_dyn(&target) {
        return None;
    }
    let name = &field.ident;
    Some(match kind {
        Kind::Optional => format!(
            "field `{name}` is an `Option<Arc<dyn ..>>` without `#[inject]`, so it would stay `None`: mark it `#[inject]` to receive the provider if one is registered, or `#[inject(skip)]` if `None` is what you mean"
        ),
        Kind::All => format!(
            "field `{name}` is a `Vec<Arc<dyn ..>>` without `#[inject]`, so it would stay empty: mark it `#[inject]` to receive every provider, or `#[inject(skip)]` if an empty list is what you mean"
        ),
        _ => format!("field `{name}` is an `Arc<dyn ..>`, which only the container can fill: mark it `#[inject]`"),
    })
}

fn config_has_a_prefix(cx: &Ctxt, model: &ProtoItem) {
    if model.scope == ProtoScope::Config && model.attr.prefix.is_none() {
        cx.error_spanned_by(
            model.ident(),
            "`#[config_proto]` needs the key of its section: `#[config_proto(prefix = \"db\")]` reads `[db]`",
        );
    }
}

fn config_injects_nothing(cx: &Ctxt, model: &ProtoItem) {
    if model.scope != ProtoScope::Config {
        return;
    }
    for (ident, _) in model.injected() {
        cx.error_spanned_by(
            ident,
            "a `#[config_proto]` is read from the configuration, not injected: remove `#[inject]`, and build what needs both from a constructor",
        );
    }
}

/// Whether the dependency is checked at compile time: not a trait object, not `external`.
pub(crate) fn checked(inject: &crate::proto::ast::Inject) -> bool {
    !is_dyn(&inject.target) && !inject.external
}

/// The scope trait an injected type must implement, checked at compile time by `__private`'s
/// `assert_..` or `dep_..` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// `SingletonProto`: what a singleton takes by value.
    Singleton,
    /// `ContextProto`: what `ContextRef<T>` and `AsyncContextRef<T>` point at.
    Context,
    /// `TransientProto`: what `Provider<T>` builds.
    Transient,
}

impl Bound {
    /// `__private`'s function `{prefix}_{bound}` (`assert_singleton`, `dep_context`).
    pub(crate) fn function(self, prefix: &str) -> syn::Ident {
        let bound = match self {
            Bound::Singleton => "singleton",
            Bound::Context => "context",
            Bound::Transient => "transient",
        };
        syn::Ident::new(&format!("{prefix}_{bound}"), proc_macro2::Span::call_site())
    }

    /// Whether `dep_..` of this bound declares a field of `kind`: its own kind (`Arc`,
    /// `ContextRef`, `Provider`).
    pub(crate) fn declares(self, kind: Kind) -> bool {
        matches!(
            (self, kind),
            (Bound::Singleton, Kind::Arc)
                | (Bound::Context, Kind::ContextRef | Kind::AsyncContextRef)
                | (Bound::Transient, Kind::Provider)
        )
    }
}

/// The bound an injected type must meet. `None` where it is unknown here (a `dyn Trait`, an
/// `external` dependency) or where `Proto::NEEDS_ASYNC`, which a context proto reads of its
/// by-value dependencies, checks that it is a proto.
pub(crate) fn bound(inject: &crate::proto::ast::Inject, singleton: bool) -> Option<Bound> {
    if !checked(inject) {
        return None;
    }
    match (inject.kind, singleton) {
        (Kind::ContextRef | Kind::AsyncContextRef, _) => Some(Bound::Context),
        (Kind::Provider, _) => Some(Bound::Transient),
        (_, true) => Some(Bound::Singleton),
        (_, false) => None,
    }
}

/// `ContextRef<T>` gives `get()`; `AsyncContextRef<T>` only `get_async()`.
pub(crate) fn sync_reference(kind: Kind) -> bool {
    kind == Kind::ContextRef
}
