//! Rules that need the whole model, one small function each.

use syn::spanned::Spanned;

use crate::ast::{Kind, ProtoItem, ProtoScope, is_dyn};
use crate::ctxt::Ctxt;

pub(crate) fn check(cx: &Ctxt, model: &ProtoItem) {
    no_generics(cx, model);
    named_fields(cx, model);
    context_ref_names_a_type(cx, model);
    context_ref_needs_inject(cx, model);
    complete_needs_a_context_proto(cx, model);
}

fn complete_needs_a_context_proto(cx: &Ctxt, model: &ProtoItem) {
    if let (Some(method), ProtoScope::Singleton | ProtoScope::Controller) = (&model.attr.complete, model.scope) {
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
    let generics = &model.item.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        cx.error_spanned_by(
            generics,
            format!(
                "{} does not support generic structs; register each instantiation by hand with `di_core::ProtoDef`",
                model.scope.attribute()
            ),
        );
    }
}

fn named_fields(cx: &Ctxt, model: &ProtoItem) {
    if model.is_tuple {
        cx.error_spanned_by(
            &model.item.fields,
            format!(
                "{} needs a struct with named fields (or a unit struct), not a tuple struct",
                model.scope.attribute()
            ),
        );
    }
}

fn context_ref_names_a_type(cx: &Ctxt, model: &ProtoItem) {
    for (_, inject) in model.injected() {
        if inject.kind == Kind::ContextRef && is_dyn(&inject.target) {
            cx.error_spanned_by(
                &inject.target,
                "`ContextRef` names the context proto's own type, not a trait object; inject the concrete type",
            );
        }
    }
}

fn context_ref_needs_inject(cx: &Ctxt, model: &ProtoItem) {
    for field in model.fields.iter().filter(|f| f.inject.is_none()) {
        if let syn::Type::Path(p) = crate::ast::ungroup(&field.ty) {
            if p.path.segments.last().is_some_and(|s| s.ident == "ContextRef") {
                cx.push(syn::Error::new(
                    field.ty.span(),
                    format!(
                        "field `{}` is a `ContextRef`, which only the container can fill; mark it `#[inject]`",
                        field.ident
                    ),
                ));
            }
        }
    }
}
