//! The validated model of an annotated struct.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{GenericArgument, PathArguments, Type};

use crate::ctxt::Ctxt;
use crate::internals::{replace_self, take_middleware};
use crate::proto::attr::{InjectAttr, ProtoAttr, ProtoScope};
use crate::symbol::{CONSTRUCTOR, INJECT};

/// How a dependency is filled, read off its type.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `Arc<T>`
    Arc,
    /// `ContextRef<T>`
    ContextRef,
    /// `AsyncContextRef<T>`
    AsyncContextRef,
    /// `Option<Arc<T>>`
    Optional,
    /// `Vec<Arc<T>>`
    All,
    /// `Keyed<T>`
    Keyed,
    /// `Provider<T>`
    Provider,
    /// `ConfigRef<T>`: a reloadable config section, as the current scope pinned it.
    ConfigRef,
    /// `TenantRef<F>`: the current tenant's object of `F: TenantObjects`.
    TenantRef,
}

impl Kind {
    /// Whether the dependency is built before the dependent (not a lazy reference).
    pub(crate) fn by_value(self) -> bool {
        !matches!(self, Kind::ContextRef | Kind::AsyncContextRef | Kind::Provider)
    }
}

pub(crate) struct Inject {
    pub(crate) kind: Kind,
    /// The `T` inside the wrapper.
    pub(crate) target: Type,
    pub(crate) name: Option<syn::LitStr>,
    /// Provided by a proto registered by hand: no compile-time check.
    pub(crate) external: bool,
}

pub(crate) struct Field {
    pub(crate) ident: syn::Ident,
    pub(crate) ty: Type,
    pub(crate) inject: Option<Inject>,
    /// `#[inject(skip)]`: built with `Default::default()`, whatever its type.
    pub(crate) skip: bool,
}

/// The constructor of an annotated `impl` block.
pub(crate) struct Ctor {
    pub(crate) ident: syn::Ident,
    pub(crate) is_async: bool,
    /// One dependency per parameter, in order; named `_{i}` where the pattern is not a name.
    pub(crate) params: Vec<(syn::Ident, Inject)>,
}

/// What the attribute is on.
pub(crate) enum Body {
    /// A struct: `#[inject]` fields are dependencies, the others `Default::default()`.
    Struct { item: syn::ItemStruct, fields: Vec<Field>, is_tuple: bool },
    /// An inherent `impl` block whose constructor takes the dependencies.
    Impl { item: syn::ItemImpl, ctor: Option<Ctor> },
}

pub(crate) struct ProtoItem {
    pub(crate) scope: ProtoScope,
    pub(crate) attr: ProtoAttr,
    /// The item as it will be emitted: our markers (`#[inject]`, `#[constructor]`) removed.
    pub(crate) body: Body,
    /// The proto's type name.
    pub(crate) ident: syn::Ident,
    /// `#[middleware(layer)]` attributes of a controller, in source order.
    pub(crate) middleware: Vec<syn::Expr>,
}

impl ToTokens for Body {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Body::Struct { item, .. } => item.to_tokens(tokens),
            Body::Impl { item, .. } => item.to_tokens(tokens),
        }
    }
}

impl ProtoItem {
    /// Parses the item; `None` (with an error recorded) only if it is neither a struct nor an
    /// `impl` block.
    pub(crate) fn from_tokens(cx: &Ctxt, args: TokenStream, item: TokenStream, scope: ProtoScope) -> Option<ProtoItem> {
        let attr = ProtoAttr::parse(cx, args, scope);
        let applies = match scope {
            ProtoScope::Singleton | ProtoScope::Context | ProtoScope::Transient => {
                "structs and `impl` blocks with a constructor"
            }
            ProtoScope::Controller | ProtoScope::Config => "structs",
        };
        let not_applicable = |span: proc_macro2::Span| {
            cx.push(syn::Error::new(span, format!("{} applies to {applies}", scope.attribute())));
        };
        let (body, ident, middleware) = match syn::parse2::<syn::Item>(item) {
            Ok(syn::Item::Struct(mut item)) => {
                let middleware =
                    if scope == ProtoScope::Controller { take_middleware(cx, &mut item.attrs) } else { Vec::new() };
                let ident = item.ident.clone();
                (struct_body(cx, item), ident, middleware)
            }
            Ok(syn::Item::Impl(item))
                if matches!(scope, ProtoScope::Singleton | ProtoScope::Context | ProtoScope::Transient) =>
            {
                // A refused block still goes back without our markers (an error is recorded, so
                // it is emitted, not expanded): `#[constructor]` or a parameter's `#[inject]`
                // left on it would add "cannot find attribute" errors to the real one.
                match impl_ident(cx, &item) {
                    Some(ident) => (impl_body(cx, item), ident, Vec::new()),
                    None => {
                        let ident = syn::Ident::new("Refused", item.self_ty.span());
                        (Body::Impl { item: strip_markers(item), ctor: None }, ident, Vec::new())
                    }
                }
            }
            Ok(other) => {
                not_applicable(other.span());
                return None;
            }
            Err(err) => {
                not_applicable(err.span());
                return None;
            }
        };
        Some(ProtoItem { scope, attr, body, ident, middleware })
    }

    pub(crate) fn ident(&self) -> &syn::Ident {
        &self.ident
    }

    /// The proto's type as the item names it: the struct's name, or the `impl` block's self
    /// type (a path such as `super::Db` resolves where the block is).
    pub(crate) fn self_ty(&self) -> TokenStream {
        match &self.body {
            Body::Struct { item, .. } => item.ident.to_token_stream(),
            Body::Impl { item, .. } => item.self_ty.to_token_stream(),
        }
    }

    /// The dependencies, in the order the factory resolves them, with the name of the field
    /// or parameter each fills.
    pub(crate) fn injected(&self) -> Box<dyn Iterator<Item = (&syn::Ident, &Inject)> + '_> {
        match &self.body {
            Body::Struct { fields, .. } => Box::new(fields.iter().filter_map(|f| Some((&f.ident, f.inject.as_ref()?)))),
            Body::Impl { ctor, .. } => Box::new(ctor.iter().flat_map(|c| c.params.iter().map(|(i, inj)| (i, inj)))),
        }
    }

    /// The constructor, for an `impl` block.
    pub(crate) fn ctor(&self) -> Option<&Ctor> {
        match &self.body {
            Body::Impl { ctor, .. } => ctor.as_ref(),
            Body::Struct { .. } => None,
        }
    }
}

fn struct_body(cx: &Ctxt, mut item: syn::ItemStruct) -> Body {
    let is_tuple = matches!(item.fields, syn::Fields::Unnamed(_));
    let mut fields = Vec::new();
    for (i, field) in item.fields.iter_mut().enumerate() {
        let attr = take_inject(cx, &mut field.attrs);
        let skip = attr.as_ref().is_some_and(|a| a.skip);
        let inject = attr.filter(|a| !a.skip).and_then(|a| classify_inject(cx, &field.ty, a, "an `#[inject]` field"));
        let ident = field.ident.clone().unwrap_or_else(|| syn::Ident::new(&format!("_{i}"), field.ty.span()));
        fields.push(Field { ident, ty: field.ty.clone(), inject, skip });
    }
    Body::Struct { item, fields, is_tuple }
}

/// Removes the `#[inject]` attribute from `attrs` and parses it (a second one is an error).
fn take_inject(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>) -> Option<InjectAttr> {
    let mut inject_attr = None;
    attrs.retain(|a| {
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
    inject_attr
}

fn classify_inject(cx: &Ctxt, ty: &Type, attr: InjectAttr, what: &str) -> Option<Inject> {
    let Some((kind, target)) = classify(ty) else {
        cx.error_spanned_by(
            ty,
            format!(
                "{what} is `Arc<T>`, `ContextRef<T>`, `AsyncContextRef<T>`, `Provider<T>`, `ConfigRef<T>`, `TenantRef<T>`, `Option<Arc<T>>`, `Vec<Arc<T>>` or `Keyed<T>`; a plain value comes from a `#[config_proto]` section (`config: Arc<MyConfig>`)"
            ),
        );
        return None;
    };
    Some(Inject { kind, target, name: attr.name, external: attr.external })
}

/// The type an inherent, non-generic `impl` block is for.
fn impl_ident(cx: &Ctxt, item: &syn::ItemImpl) -> Option<syn::Ident> {
    if let Some((_, path, _)) = &item.trait_ {
        cx.error_spanned_by(path, "a proto's constructor is in an inherent `impl` block, not a trait impl");
        return None;
    }
    let Type::Path(path) = ungroup(&item.self_ty) else {
        cx.error_spanned_by(&item.self_ty, "a proto's `impl` block is for a named struct type");
        return None;
    };
    match path.path.segments.last() {
        Some(last) if path.qself.is_none() => Some(last.ident.clone()),
        _ => {
            cx.error_spanned_by(&item.self_ty, "a proto's `impl` block is for a named struct type");
            None
        }
    }
}

/// The block without `#[constructor]` and parameters' `#[inject]`, for a block that is refused.
fn strip_markers(mut item: syn::ItemImpl) -> syn::ItemImpl {
    for impl_item in &mut item.items {
        if let syn::ImplItem::Fn(f) = impl_item {
            f.attrs.retain(|a| !a.path().is_ident(CONSTRUCTOR));
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(arg) = input {
                    arg.attrs.retain(|a| !a.path().is_ident(INJECT));
                }
            }
        }
    }
    item
}

/// Finds the constructor (`#[constructor]`, else `new`) and reads its parameters.
fn impl_body(cx: &Ctxt, mut item: syn::ItemImpl) -> Body {
    let self_ty = (*item.self_ty).clone();
    let mut marked = Vec::new();
    for (i, impl_item) in item.items.iter_mut().enumerate() {
        if let syn::ImplItem::Fn(f) = impl_item {
            let before = f.attrs.len();
            f.attrs.retain(|a| !a.path().is_ident(CONSTRUCTOR));
            if f.attrs.len() != before {
                marked.push(i);
            }
        }
    }
    let index = match marked.as_slice() {
        [one] => Some(*one),
        [] => item.items.iter().position(|i| matches!(i, syn::ImplItem::Fn(f) if f.sig.ident == "new")),
        [_, second, ..] => {
            if let syn::ImplItem::Fn(f) = &item.items[*second] {
                cx.error_spanned_by(&f.sig.ident, "only one function of the `impl` block can be `#[constructor]`");
            }
            None
        }
    };
    let Some(index) = index else {
        if marked.len() <= 1 {
            cx.error_spanned_by(
                &item.self_ty,
                "no constructor in this `impl` block: name it `new`, or mark another associated function `#[constructor]`",
            );
        }
        return Body::Impl { item, ctor: None };
    };
    let syn::ImplItem::Fn(f) = &mut item.items[index] else { unreachable!("found as a function above") };
    let ctor = ctor(cx, &mut f.sig, &self_ty);
    Body::Impl { item, ctor }
}

fn ctor(cx: &Ctxt, sig: &mut syn::Signature, self_ty: &Type) -> Option<Ctor> {
    if !sig.generics.params.is_empty() {
        cx.error_spanned_by(&sig.generics, "a constructor takes no generic parameters");
    }
    let mut params = Vec::new();
    for (i, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            syn::FnArg::Receiver(r) => {
                cx.error_spanned_by(r, "a constructor is an associated function: it takes no `self`");
            }
            syn::FnArg::Typed(arg) => {
                let attr = take_inject(cx, &mut arg.attrs).unwrap_or_default();
                if attr.skip {
                    cx.error_spanned_by(
                        &arg.pat,
                        "a constructor's parameters are all injected: build this value inside the constructor instead of taking it",
                    );
                    continue;
                }
                let name = match &*arg.pat {
                    syn::Pat::Ident(p) => p.ident.clone(),
                    _ => syn::Ident::new(&format!("_{i}"), arg.pat.span()),
                };
                let what = "a constructor parameter is injected, so it";
                if let Some(inject) = classify_inject(cx, &replace_self(&arg.ty, self_ty), attr, what) {
                    params.push((name, inject));
                }
            }
        }
    }
    Some(Ctor { ident: sig.ident.clone(), is_async: sig.asyncness.is_some(), params })
}

/// `Arc<T>`, `ContextRef<T>`, `Option<Arc<T>>`, `Vec<Arc<T>>`...: the kind and `T`.
pub(crate) fn classify(ty: &Type) -> Option<(Kind, Type)> {
    let (wrapper, inner) = single_generic(ty)?;
    match wrapper.as_str() {
        "Arc" => Some((Kind::Arc, inner.clone())),
        "ContextRef" => Some((Kind::ContextRef, inner.clone())),
        "AsyncContextRef" => Some((Kind::AsyncContextRef, inner.clone())),
        "Keyed" => Some((Kind::Keyed, inner.clone())),
        "Provider" => Some((Kind::Provider, inner.clone())),
        "ConfigRef" => Some((Kind::ConfigRef, inner.clone())),
        "TenantRef" => Some((Kind::TenantRef, inner.clone())),
        "Option" | "Vec" => {
            let (arc, target) = single_generic(inner)?;
            let kind = if wrapper == "Option" { Kind::Optional } else { Kind::All };
            (arc == "Arc").then(|| (kind, target.clone()))
        }
        _ => None,
    }
}

/// `Name<T>` (any path prefix): the last segment's name and `T`.
pub(crate) fn single_generic(ty: &Type) -> Option<(String, &Type)> {
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

/// The `T` a field without `#[inject]` holds, where the App may have a `T` registered by hand
/// that the field would not be: `Arc<T>`, `Option<Arc<T>>`, `Vec<Arc<T>>`, `Box<T>`, `Weak<T>`,
/// with `T` a named type (a trait object, `str` or a slice is never a proto).
pub(crate) fn unmarked_target(ty: &Type) -> Option<&Type> {
    let (wrapper, inner) = single_generic(ty)?;
    let target = match wrapper.as_str() {
        "Arc" | "Box" | "Weak" => inner,
        "Option" | "Vec" => match single_generic(inner)? {
            (arc, target) if arc == "Arc" => target,
            _ => return None,
        },
        _ => return None,
    };
    match ungroup(target) {
        Type::Path(path) if !path.path.is_ident("str") => Some(target),
        _ => None,
    }
}

/// Whether `T` is a trait object, which no compile-time proto check applies to.
pub(crate) fn is_dyn(ty: &Type) -> bool {
    matches!(ungroup(ty), Type::TraitObject(_))
}
