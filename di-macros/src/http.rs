//! `#[http_routes]`: the model of an annotated impl block and its expansion. The struct half,
//! `#[http_controller]`, is a proto (`ast`, `expand`) with a path prefix and middleware.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::take_middleware;
use crate::attr::check_route_path;
use crate::ctxt::Ctxt;
use crate::expand::finish;
use crate::symbol::{CRATE, HTTP_METHODS, METHOD, ROUTE, ROUTE_ATTRS};

/// One route: an HTTP method and path served by a method of the controller.
struct Route {
    http_method: String,
    path: syn::LitStr,
    /// The `#[get(...)]`-style attribute, for spans.
    attr_span: Span,
}

/// A method of the impl block with at least one route attribute.
struct Handler {
    ident: syn::Ident,
    routes: Vec<Route>,
    args: Vec<syn::Type>,
    is_async: bool,
    output: Option<syn::Type>,
    middleware: Vec<syn::Expr>,
}

struct RoutesItem {
    krate: Option<syn::Path>,
    /// The impl block as it will be emitted: route and middleware attributes removed.
    item: syn::ItemImpl,
    handlers: Vec<Handler>,
}

pub(crate) fn routes(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let model = parse(&cx, args, item.clone());
    finish(cx, model.as_ref().map(|m| (&m.item, m)), item, expand)
}

fn parse(cx: &Ctxt, args: TokenStream, item: TokenStream) -> Option<RoutesItem> {
    let mut krate = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident(CRATE) {
            let path = meta.value()?.call(syn::Path::parse_mod_style)?;
            if krate.replace(path).is_some() {
                cx.error_spanned_by(&meta.path, "`crate` is given twice");
            }
        } else {
            cx.error_spanned_by(&meta.path, "unknown option; `#[http_routes]` takes only `crate = path`");
        }
        Ok(())
    });
    if let Err(err) = syn::parse::Parser::parse2(parser, args) {
        cx.push(err);
    }
    let mut item: syn::ItemImpl = match syn::parse2(item) {
        Ok(item) => item,
        Err(err) => {
            cx.push(syn::Error::new(err.span(), "#[http_routes] applies to an inherent impl block of a controller"));
            return None;
        }
    };
    if let Some((_, path, _)) = &item.trait_ {
        cx.error_spanned_by(path, "#[http_routes] applies to an inherent impl block, not a trait impl");
    }
    if !item.generics.params.is_empty() {
        cx.error_spanned_by(&item.generics, "a controller cannot be generic: the container builds one of it");
    }
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
        if let Some(handler) = handler(cx, &self_ty, &method.sig, routes, middleware) {
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
    Some(RoutesItem { krate, item, handlers })
}

/// Removes the route attributes from `attrs` and returns their routes.
fn take_routes(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>) -> Vec<Route> {
    let mut routes = Vec::new();
    attrs.retain(|attr| {
        let shorthand = ROUTE_ATTRS.iter().find(|(name, _)| attr.path().is_ident(name));
        let route = if let Some((name, http_method)) = shorthand {
            match attr.parse_args::<syn::LitStr>() {
                Ok(path) => Some(Route { http_method: (*http_method).to_owned(), path, attr_span: attr.span() }),
                Err(_) => {
                    cx.error_spanned_by(attr, format!("write `#[{name}(\"/path\")]`"));
                    None
                }
            }
        } else if attr.path().is_ident(ROUTE) {
            parse_general(cx, attr)
        } else {
            return true;
        };
        if let Some(route) = route {
            if let Err(reason) = check_route_path(&route.path.value()) {
                cx.error_spanned_by(&route.path, reason);
            }
            routes.push(route);
        }
        false
    });
    routes
}

/// `#[route("/path", method = "GET")]`.
fn parse_general(cx: &Ctxt, attr: &syn::Attribute) -> Option<Route> {
    let usage = "write `#[route(\"/path\", method = \"GET\")]`";
    let parsed = attr.parse_args_with(|input: syn::parse::ParseStream<'_>| {
        let path: syn::LitStr = input.parse()?;
        input.parse::<syn::Token![,]>()?;
        let key: syn::Ident = input.parse()?;
        if key != METHOD {
            return Err(syn::Error::new(key.span(), usage));
        }
        input.parse::<syn::Token![=]>()?;
        let method: syn::LitStr = input.parse()?;
        let _ = input.parse::<Option<syn::Token![,]>>()?;
        Ok((path, method))
    });
    match parsed {
        Ok((path, method)) => {
            let http_method = method.value().to_ascii_uppercase();
            if !HTTP_METHODS.contains(&http_method.as_str()) {
                cx.error_spanned_by(
                    &method,
                    format!("unknown HTTP method `{}`; expected one of {}", method.value(), HTTP_METHODS.join(", ")),
                );
                return None;
            }
            Some(Route { http_method, path, attr_span: attr.span() })
        }
        Err(_) => {
            cx.error_spanned_by(attr, usage);
            None
        }
    }
}

fn handler(
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
            syn::FnArg::Typed(pat) => args.push(crate::ast::replace_self(&pat.ty, self_ty)),
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

fn expand(model: &RoutesItem) -> TokenStream {
    let krate = model.krate.clone().map_or_else(|| quote!(::di_http), |p| quote!(#p));
    let item = &model.item;
    let self_ty = &model.item.self_ty;
    let routes = model.handlers.iter().flat_map(|h| h.routes.iter().map(move |r| (h, r))).map(|(handler, route)| {
        let ident = &handler.ident;
        let names: Vec<_> = (0..handler.args.len()).map(|i| format_ident!("__di_a{}", i)).collect();
        let types = &handler.args;
        let last = handler.args.len().saturating_sub(1);
        let checks = handler.args.iter().enumerate().map(|(i, ty)| {
            if i == last {
                quote_spanned!(ty.span()=> __dih::assert_last_extractor::<#ty, _>();)
            } else {
                quote_spanned!(ty.span()=> __dih::assert_parts_extractor::<#ty>();)
            }
        });
        // Spanned at the return type, so a type that is no response is reported there.
        let span = handler.output.as_ref().map_or_else(|| ident.span(), Spanned::span);
        let respond = quote_spanned!(span=> __dih::IntoResponse::into_response);
        // Converted inside the block: a `-> impl IntoResponse` of a `&self` method captures the
        // borrow of the controller (edition 2024), which must not outlive the block.
        let call = if handler.is_async {
            quote!(__di_c.#ident(#(#names),*).await)
        } else {
            quote!(__di_c.#ident(#(#names),*))
        };
        let filter = syn::Ident::new(&route.http_method, route.attr_span);
        let http_method = &route.http_method;
        let path = &route.path;
        let fn_name = ident.to_string();
        let layers = handler.middleware.iter().rev();
        quote! {
            {
                #(#checks)*
                // A fn item, not a closure: a compile error about it names the method, not a
                // closure at a file path. The response is built inside, where the controller
                // is still borrowed (an `impl IntoResponse` of a `&self` method captures it).
                async fn #ident(
                    __dih::State(__di_c): __dih::State<__dih::Arc<#self_ty>>,
                    #(#names: #types),*
                ) -> __dih::Response {
                    #respond(#call)
                }
                let __di_m = __dih::on(__dih::MethodFilter::#filter, #ident).with_state(__dih::Arc::clone(__di_this));
                __di_routes.add(#http_method, #path, #fn_name, __di_m #(.layer(#layers))*);
            }
        }
    });
    quote! {
        #item

        const _: () = {
            use #krate::__private as __dih;

            fn __di_routes(__di_routes: &mut __dih::Routes) -> __dih::Result<(), __dih::DiError> {
                let __di_this = &__di_routes.controller::<#self_ty>()?;
                #(#routes)*
                __dih::Result::Ok(())
            }

            __dih::inventory::submit! { __dih::ControllerRoutes::new::<#self_ty>(__di_routes) }
        };
    }
}
