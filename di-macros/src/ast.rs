//! The validated model of an annotated struct.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{GenericArgument, PathArguments, Type};

use crate::attr::{InjectAttr, ProtoAttr};
use crate::ctxt::Ctxt;
use crate::symbol::{INJECT, MIDDLEWARE};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtoScope {
    Singleton,
    Context,
    /// `#[http_controller]`: a singleton whose routes `#[http_routes]` registers with di-http.
    Controller,
}

impl ProtoScope {
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            ProtoScope::Singleton => "#[singleton_proto]",
            ProtoScope::Context => "#[context_proto]",
            ProtoScope::Controller => "#[http_controller]",
        }
    }
}

/// How an `#[inject]` field is filled, read off its type.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `Arc<T>`
    Arc,
    /// `ContextRef<T>`
    ContextRef,
    /// `Option<Arc<T>>`
    Optional,
    /// `Vec<Arc<T>>`
    All,
}

pub(crate) struct Inject {
    pub(crate) kind: Kind,
    /// The `T` inside the wrapper.
    pub(crate) target: Type,
    pub(crate) name: Option<syn::LitStr>,
}

pub(crate) struct Field {
    pub(crate) ident: syn::Ident,
    pub(crate) ty: Type,
    pub(crate) inject: Option<Inject>,
}

pub(crate) struct ProtoItem {
    pub(crate) scope: ProtoScope,
    pub(crate) attr: ProtoAttr,
    /// The struct as it will be emitted: `#[inject]` markers removed.
    pub(crate) item: syn::ItemStruct,
    pub(crate) fields: Vec<Field>,
    pub(crate) is_tuple: bool,
    /// `#[middleware(layer)]` attributes of a controller, in source order.
    pub(crate) middleware: Vec<syn::Expr>,
}

impl ProtoItem {
    /// Parses the struct; `None` (with an error recorded) only if it is not a struct at all.
    pub(crate) fn from_tokens(cx: &Ctxt, args: TokenStream, item: TokenStream, scope: ProtoScope) -> Option<ProtoItem> {
        let attr = ProtoAttr::parse(cx, args, scope);
        let mut item: syn::ItemStruct = match syn::parse2(item) {
            Ok(item) => item,
            Err(err) => {
                cx.push(syn::Error::new(err.span(), format!("{} applies to structs", scope.attribute())));
                return None;
            }
        };
        let is_tuple = matches!(item.fields, syn::Fields::Unnamed(_));
        let middleware =
            if scope == ProtoScope::Controller { take_middleware(cx, &mut item.attrs) } else { Vec::new() };
        let mut fields = Vec::new();
        for (i, field) in item.fields.iter_mut().enumerate() {
            let mut inject_attr = None;
            field.attrs.retain(|a| {
                if !a.path().is_ident(INJECT) {
                    return true;
                }
                if inject_attr.is_some() {
                    cx.error_spanned_by(a, "`#[inject]` specified more than once");
                } else {
                    inject_attr = Some(InjectAttr::parse(cx, a));
                }
                false
            });
            let inject = inject_attr.and_then(|a| {
                let Some((kind, target)) = classify(&field.ty) else {
                    cx.error_spanned_by(
                        &field.ty,
                        "an `#[inject]` field is `Arc<T>`, `ContextRef<T>`, `Option<Arc<T>>` or `Vec<Arc<T>>`",
                    );
                    return None;
                };
                Some(Inject { kind, target, name: a.name })
            });
            let ident = field.ident.clone().unwrap_or_else(|| syn::Ident::new(&format!("_{i}"), field.ty.span()));
            fields.push(Field { ident, ty: field.ty.clone(), inject });
        }
        Some(ProtoItem { scope, attr, item, fields, is_tuple, middleware })
    }

    pub(crate) fn ident(&self) -> &syn::Ident {
        &self.item.ident
    }

    pub(crate) fn injected(&self) -> impl Iterator<Item = (&Field, &Inject)> {
        self.fields.iter().filter_map(|f| Some((f, f.inject.as_ref()?)))
    }
}

/// `Arc<T>`, `ContextRef<T>`, `Option<Arc<T>>`, `Vec<Arc<T>>`: the kind and `T`.
/// Removes the `#[middleware(layer)]` attributes from `attrs` and returns their layers.
pub(crate) fn take_middleware(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>) -> Vec<syn::Expr> {
    let mut layers = Vec::new();
    attrs.retain(|a| {
        if !a.path().is_ident(MIDDLEWARE) {
            return true;
        }
        match a.parse_args::<syn::Expr>() {
            Ok(expr) => layers.push(expr),
            Err(_) => cx.error_spanned_by(a, "write `#[middleware(layer)]`, with a tower `Layer` expression"),
        }
        false
    });
    layers
}

fn classify(ty: &Type) -> Option<(Kind, Type)> {
    let (wrapper, inner) = single_generic(ty)?;
    match wrapper.as_str() {
        "Arc" => Some((Kind::Arc, inner.clone())),
        "ContextRef" => Some((Kind::ContextRef, inner.clone())),
        "Option" | "Vec" => {
            let (arc, target) = single_generic(inner)?;
            let kind = if wrapper == "Option" { Kind::Optional } else { Kind::All };
            (arc == "Arc").then(|| (kind, target.clone()))
        }
        _ => None,
    }
}

/// `Name<T>` (any path prefix): the last segment's name and `T`.
fn single_generic(ty: &Type) -> Option<(String, &Type)> {
    let Type::Path(path) = ungroup(ty) else { return None };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(inner)] => Some((last.ident.to_string(), inner)),
        _ => None,
    }
}

pub(crate) fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => ungroup(&g.elem),
        Type::Paren(p) => ungroup(&p.elem),
        other => other,
    }
}

/// Whether `T` is a trait object, which no compile-time proto check applies to.
pub(crate) fn is_dyn(ty: &Type) -> bool {
    matches!(ungroup(ty), Type::TraitObject(_))
}
