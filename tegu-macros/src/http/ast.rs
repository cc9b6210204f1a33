//! The model of a `#[http_routes]` impl block: its route methods, each with the extractor
//! types axum will call it with.

use proc_macro2::TokenStream;

use super::attr::{Route, RoutesAttr, take_routes};
use crate::ctxt::Ctxt;
use crate::internals::{inherent_impl, replace_self, take_middleware};

/// The impl block, validated.
pub(super) struct RoutesItem {
    pub(super) attr: RoutesAttr,
    /// The impl block as it will be emitted: route and middleware attributes removed.
    pub(super) item: syn::ItemImpl,
    pub(super) handlers: Vec<Handler>,
}

/// A method of the impl block with at least one route attribute.
pub(super) struct Handler {
    pub(super) ident: syn::Ident,
    pub(super) routes: Vec<Route>,
    /// The extractor types, `Self` replaced by the controller's type.
    pub(super) args: Vec<syn::Type>,
    pub(super) is_async: bool,
    pub(super) output: Option<syn::Type>,
    /// `#[middleware(layer)]` on the method, outermost first.
    pub(super) middleware: Vec<syn::Expr>,
}

impl RoutesItem {
    /// Parses the impl block; `None` (with the error recorded) if it is no impl block.
    pub(super) fn from_tokens(cx: &Ctxt, attr: RoutesAttr, item: TokenStream) -> Option<RoutesItem> {
        let mut item = inherent_impl(cx, item, "#[http_routes]", "controller")?;
        let self_ty = (*item.self_ty).clone();
        let mut handlers = Vec::new();
        let mut any_route = false;
        for impl_item in &mut item.items {
            let syn::ImplItem::Fn(method) = impl_item else { continue };
            let routes = take_routes(cx, &mut method.attrs);
            let middleware = take_middleware(cx, &mut method.attrs);
            if routes.is_empty() {
                if !middleware.is_empty() {
                    cx.error_spanned_by(
                        &method.sig.ident,
                        "`#[middleware]` on a method needs a route attribute such as `#[get(\"/\")]`",
                    );
                }
                continue;
            }
            any_route = true;
            if let Some(handler) = Handler::from_sig(cx, &self_ty, &method.sig, routes, middleware) {
                handlers.push(handler);
            }
        }
        if !any_route && item.trait_.is_none() {
            cx.error_spanned_by(
                &item.self_ty,
                "no routes: mark methods with `#[get(\"/path\")]`, `#[post(..)]`, `#[put(..)]`, `#[delete(..)]`, \
                 `#[patch(..)]` or `#[route(\"/path\", method = \"..\")]`",
            );
        }
        Some(RoutesItem { attr, item, handlers })
    }
}

impl Handler {
    /// The route method's signature as axum needs it: `&self`, not generic, extractor types.
    fn from_sig(
        cx: &Ctxt,
        self_ty: &syn::Type,
        sig: &syn::Signature,
        routes: Vec<Route>,
        middleware: Vec<syn::Expr>,
    ) -> Option<Handler> {
        let mut ok = true;
        match sig.inputs.first() {
            Some(syn::FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
            _ => {
                cx.error_spanned_by(
                    sig,
                    format!("route method `{}` takes `&self`: the controller is a shared singleton", sig.ident),
                );
                ok = false;
            }
        }
        if !sig.generics.params.is_empty() {
            cx.error_spanned_by(&sig.generics, "a route method cannot be generic: axum needs its extractor types");
            ok = false;
        }
        let mut args = Vec::new();
        for input in sig.inputs.iter().skip(1) {
            match input {
                syn::FnArg::Typed(pat) if matches!(*pat.ty, syn::Type::ImplTrait(_)) => {
                    cx.error_spanned_by(&pat.ty, "a route argument is an axum extractor type, not `impl Trait`");
                    ok = false;
                }
                // The handler is generated outside the impl block, where `Self` means nothing.
                syn::FnArg::Typed(pat) => args.push(replace_self(&pat.ty, self_ty)),
                syn::FnArg::Receiver(_) => {}
            }
        }
        let output = match &sig.output {
            syn::ReturnType::Type(_, ty) => Some((**ty).clone()),
            syn::ReturnType::Default => None,
        };
        ok.then(|| Handler {
            ident: sig.ident.clone(),
            routes,
            args,
            is_async: sig.asyncness.is_some(),
            output,
            middleware,
        })
    }
}
