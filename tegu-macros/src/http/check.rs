//! Rules that need the whole impl block.

use std::collections::HashMap;

use super::ast::RoutesItem;
use crate::ctxt::Ctxt;

pub(super) fn check(cx: &Ctxt, model: &RoutesItem) {
    route_declared_once(cx, model);
}

/// The same method and path twice in one block would fail at start-up, when tegu-http merges
/// the routes; here it fails at compile time, at the second declaration. Only the same path
/// text is caught: paths that differ in a capture's name (`/{id}`, `/{name}`) still clash at
/// start-up, where tegu-http compares the routes of every controller.
fn route_declared_once(cx: &Ctxt, model: &RoutesItem) {
    let mut seen: HashMap<(&str, String), &syn::Ident> = HashMap::new();
    for handler in &model.handlers {
        for route in &handler.routes {
            let key = (route.http_method.as_str(), route.path.value());
            let Some(first) = seen.insert(key, &handler.ident) else { continue };
            let (method, path) = (&route.http_method, route.path.value());
            let by = if *first == handler.ident {
                format!("twice on `{first}`")
            } else {
                format!("twice in this block: by `{first}` and by `{}`", handler.ident)
            };
            cx.error_spanned_by(&route.path, format!("route `{method} {path}` is declared {by}"));
        }
    }
}
