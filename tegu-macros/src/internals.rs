//! What every attribute's stages share: the output of an attribute macro, inherent `impl`
//! blocks and `Self`, options given once, and the checks of route paths and middleware that
//! controllers and routes both read. Beside `ctxt` (errors) and `symbol` (names).

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::Token;
use syn::meta::ParseNestedMeta;

use crate::ctxt::Ctxt;
use crate::symbol::{CRATE, MIDDLEWARE};

/// The output of an attribute macro: the expansion of `model` if `cx` holds no error; else the
/// errors after the item (the model's, without our markers, so that one mistake doesn't
/// cascade; or the input as it came). `DI_MACROS_DEBUG=1` prints it.
pub(crate) fn finish<I: ToTokens, M>(
    cx: Ctxt,
    model: Option<(&I, &M)>,
    input: TokenStream,
    expand: impl FnOnce(&M) -> TokenStream,
) -> TokenStream {
    let out = match (cx.check(), model) {
        (Ok(()), Some((_, model))) => expand(model),
        (Ok(()), None) => unreachable!("a parser records an error whenever it returns no model"),
        (Err(errors), Some((item, _))) => {
            let errors = errors.to_compile_error();
            quote!(#item #errors)
        }
        (Err(errors), None) => {
            let errors = errors.to_compile_error();
            quote!(#input #errors)
        }
    };
    if std::env::var_os("DI_MACROS_DEBUG").is_some_and(|v| v == "1") {
        eprintln!("{out}");
    }
    out
}

/// `ty` with every `Self` replaced by `self_ty`: for types moved out of an `impl` block into
/// generated free functions, where `Self` means nothing.
/// The impl block an attribute such as `#[handlers]` is on: inherent and not generic, since
/// the container builds one object of its type (`owner`, "singleton proto" or "controller").
/// Errors name `attribute`; `None` (with the error recorded) if `item` is no impl block.
pub(crate) fn inherent_impl(cx: &Ctxt, item: TokenStream, attribute: &str, owner: &str) -> Option<syn::ItemImpl> {
    let item: syn::ItemImpl = match syn::parse2(item) {
        Ok(item) => item,
        Err(err) => {
            let message = format!("`{attribute}` applies to an inherent impl block of a {owner}");
            cx.push(syn::Error::new(err.span(), message));
            return None;
        }
    };
    if let Some((_, path, _)) = &item.trait_ {
        cx.error_spanned_by(path, format!("`{attribute}` applies to an inherent impl block, not a trait impl"));
    }
    if !item.generics.params.is_empty() {
        cx.error_spanned_by(
            &item.generics,
            format!("`{attribute}` applies to the impl block of a non-generic {owner}: the container builds one of it"),
        );
    }
    Some(item)
}

pub(crate) fn replace_self(ty: &syn::Type, self_ty: &syn::Type) -> syn::Type {
    fn walk(tokens: TokenStream, self_ty: &syn::Type) -> TokenStream {
        tokens
            .into_iter()
            .flat_map(|tree| match tree {
                proc_macro2::TokenTree::Ident(ident) if ident == "Self" => quote_spanned!(ident.span()=> #self_ty),
                proc_macro2::TokenTree::Group(group) => {
                    let mut new = proc_macro2::Group::new(group.delimiter(), walk(group.stream(), self_ty));
                    new.set_span(group.span());
                    quote!(#new)
                }
                other => quote!(#other),
            })
            .collect()
    }
    syn::parse2(walk(quote!(#ty), self_ty)).unwrap_or_else(|_| ty.clone())
}

/// Sets `slot` once; a second occurrence is reported at its own span.
pub(crate) fn once<T>(cx: &Ctxt, meta: &ParseNestedMeta<'_>, slot: &mut Option<T>, value: T) {
    if slot.is_some() {
        cx.error_spanned_by(&meta.path, format!("`{}` specified more than once", path_name(&meta.path)));
    } else {
        *slot = Some(value);
    }
}

/// The options of an attribute that takes only `crate = path` (the path generated code reaches
/// the runtime crate through, for a crate that re-exports it), each at most once.
pub(crate) fn crate_option(cx: &Ctxt, args: TokenStream, attribute: &str) -> Option<syn::Path> {
    let mut krate = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident(CRATE) {
            let path = meta.value()?.call(syn::Path::parse_mod_style)?;
            once(cx, &meta, &mut krate, path);
        } else {
            cx.error_spanned_by(&meta.path, format!("unknown option; `#[{attribute}]` takes only `crate = path`"));
            skip_value(&meta)?;
        }
        Ok(())
    });
    if let Err(err) = syn::parse::Parser::parse2(parser, args) {
        cx.push(err);
    }
    krate
}

/// The path of the runtime's hidden `__private` module: under `krate` if given, else under
/// `default` (`::tegu_core`, `::tegu_http`).
pub(crate) fn private_path(krate: Option<&syn::Path>, default: TokenStream) -> TokenStream {
    match krate {
        Some(path) => quote!(#path::__private),
        None => quote!(#default::__private),
    }
}

/// `path` (the runtime's `__private` path) with every token at `span`: in code spanned at the
/// user's tokens, an error about the whole expression then points there alone.
pub(crate) fn respan(path: &TokenStream, span: proc_macro2::Span) -> TokenStream {
    path.clone()
        .into_iter()
        .map(|mut tree| {
            tree.set_span(span);
            tree
        })
        .collect()
}

pub(crate) fn path_name(path: &syn::Path) -> String {
    quote::quote!(#path).to_string().replace(' ', "")
}

/// Skips the value of an unknown or malformed option, so parsing goes on with the next one.
pub(crate) fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _group: proc_macro2::Group = meta.input.parse()?;
    }
    Ok(())
}

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

/// A controller prefix is empty or a route path without a catch-all.
pub(crate) fn check_prefix(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Ok(());
    }
    check_path(path, true)
}

/// The checks on a route path that need no other route, in axum 0.8's syntax: compile-time, so
/// that tegu-http only has clashes left to find at start-up. A prefix may not hold a catch-all,
/// which must end the whole path.
pub(crate) fn check_route_path(path: &str) -> Result<(), String> {
    check_path(path, false)
}

fn check_path(path: &str, prefix: bool) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("a route path starts with `/`: write \"/{path}\""));
    }
    let mut open = false;
    for c in path.chars() {
        match (c, open) {
            ('{', false) => open = true,
            ('}', true) => open = false,
            ('{', true) | ('}', false) => return Err(format!("unbalanced `{{`/`}}` in route path \"{path}\"")),
            _ => {}
        }
    }
    if open {
        return Err(format!("unbalanced `{{`/`}}` in route path \"{path}\""));
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, segment) in segments.iter().enumerate() {
        if segment.starts_with(':') || segment.starts_with('*') {
            return Err(format!(
                "route path \"{path}\" uses the old `{segment}` syntax; axum 0.8 captures are written `{{name}}` and `{{*name}}`"
            ));
        }
        if !segment.contains('{') {
            continue;
        }
        let Some(inner) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')).filter(|s| !s.contains('{'))
        else {
            return Err(format!("in route path \"{path}\", a capture is a whole segment: `{segment}`"));
        };
        let name = inner.strip_prefix('*').unwrap_or(inner);
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(format!(
                "in route path \"{path}\", capture `{segment}` needs a name of letters, digits and `_`"
            ));
        }
        if inner.starts_with('*') && (prefix || i + 1 != segments.len()) {
            return Err(format!("in route path \"{path}\", the catch-all `{segment}` must end the route's path"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_route_path_names_what_is_wrong() {
        assert!(check_route_path("/u/{id}/t/{*rest}").is_ok());
        assert!(check_route_path("u").unwrap_err().contains("starts with"));
        assert!(check_route_path("/u/:id").unwrap_err().contains("old `:id` syntax"));
        assert!(check_route_path("/u/{id").unwrap_err().contains("unbalanced"));
        assert!(check_route_path("/u/{}").unwrap_err().contains("needs a name"));
        assert!(check_route_path("/u/{*rest}/x").unwrap_err().contains("must end"));
        assert!(check_route_path("/u/x{id}").unwrap_err().contains("whole segment"));
        assert!(check_prefix("/files/{*rest}").unwrap_err().contains("must end"));
        assert!(check_prefix("").is_ok());
    }
}
