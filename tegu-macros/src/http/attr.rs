//! The options of `#[http_routes(...)]` and the route attributes of its methods
//! (`#[get("/path")]`, `#[route("/path", method = "GET")]`).

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;
use crate::internals::{check_route_path, crate_option};
use crate::symbol::{HTTP_METHODS, METHOD, ROUTE, ROUTE_ATTRS};

/// `#[http_routes(crate = path)]`, each option at most once.
#[derive(Default)]
pub(super) struct RoutesAttr {
    pub(super) krate: Option<syn::Path>,
}

impl RoutesAttr {
    pub(super) fn parse(cx: &Ctxt, args: TokenStream) -> RoutesAttr {
        RoutesAttr { krate: crate_option(cx, args, "http_routes") }
    }
}

/// One route: an HTTP method and path served by a method of the controller.
pub(super) struct Route {
    pub(super) http_method: String,
    pub(super) path: syn::LitStr,
    /// The `#[get(...)]`-style attribute, for spans.
    pub(super) attr_span: Span,
}

/// Removes the route attributes from `attrs` and returns their routes; a malformed one is
/// reported and left out.
pub(super) fn take_routes(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>) -> Vec<Route> {
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
