//! `#[transactional(..)]`: tegu-tx's advice `Transactional` around an async method, with its
//! options as the call's parameters. Expanded by `intercept.rs` as one more advice of the
//! method's chain, in the order the attributes are written.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::punctuated::Punctuated;

use crate::advice_use::AdviceUse;
use crate::ctxt::Ctxt;

/// The attribute's name, as `intercept.rs` finds it among a method's attributes.
pub(crate) const TRANSACTIONAL: &str = "transactional";

/// What `build()` says when a `#[transactional]` method's data source is not in the App.
const FIX: &str = "register a data source, a proto that provides `dyn tegu_tx::TxSource`: tegu-sqlx's `Database` with `App::builder().link::<Database<Sqlite>>()` (or `Postgres`), or `Database::<Sqlite>::named(\"name\", \"section\")` for a named one; with several, name one with `#[transactional(source = \"name\")]`";

/// The propagations, as written and as `tegu_tx::Propagation` names them.
const PROPAGATIONS: [(&str, &str); 5] = [
    ("required", "Required"),
    ("requires_new", "RequiresNew"),
    ("nested", "Nested"),
    ("mandatory", "Mandatory"),
    ("never", "Never"),
];

/// One entry of `#[transactional(..)]`.
enum Arg {
    /// `required`, `requires_new`, ...: a propagation (or a misspelt one).
    Word(syn::Ident),
    /// `source = "orders"`.
    Source(syn::Ident, syn::LitStr),
    /// `crate = path`: where tegu-tx is.
    Krate(syn::Path),
}

impl syn::parse::Parse for Arg {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(syn::Token![crate]) {
            input.parse::<syn::Token![crate]>()?;
            input.parse::<syn::Token![=]>()?;
            return Ok(Arg::Krate(input.call(syn::Path::parse_mod_style)?));
        }
        let ident: syn::Ident = input.parse()?;
        if input.peek(syn::Token![=]) {
            input.parse::<syn::Token![=]>()?;
            return Ok(Arg::Source(ident, input.parse()?));
        }
        Ok(Arg::Word(ident))
    }
}

/// The advice `#[transactional(args)]` adds to a method's chain; `None` (with the errors in
/// `cx`) if `args` do not parse.
pub(crate) fn parse(cx: &Ctxt, args: TokenStream) -> Option<AdviceUse> {
    let parser = Punctuated::<Arg, syn::Token![,]>::parse_terminated;
    let list = match syn::parse::Parser::parse2(parser, args) {
        Ok(list) => list,
        Err(err) => {
            cx.push(syn::Error::new(
                err.span(),
                "write the options as `#[transactional(requires_new, source = \"orders\")]`",
            ));
            return None;
        }
    };
    let (mut propagation, mut source, mut krate) = (None, None, None);
    for arg in list {
        match arg {
            Arg::Word(word) => match PROPAGATIONS.iter().find(|(written, _)| word == written) {
                Some(_) if propagation.is_some() => {
                    cx.error_spanned_by(&word, "the propagation is specified more than once")
                }
                Some((_, variant)) => propagation = Some(syn::Ident::new(variant, word.span())),
                None => cx.error_spanned_by(
                    &word,
                    format!(
                        "unknown option `{word}` of `#[transactional]`: a propagation (`required`, the default, `requires_new`, `nested`, `mandatory` or `never`), `source = \"name\"` or `crate = path`"
                    ),
                ),
            },
            Arg::Source(key, _) if key != "source" => cx.error_spanned_by(
                &key,
                format!("unknown option `{key}` of `#[transactional]`: `source = \"name\"` names the data source"),
            ),
            Arg::Source(key, _) if source.is_some() => {
                cx.error_spanned_by(&key, "`source` is specified more than once")
            }
            Arg::Source(_, name) if name.value().is_empty() => {
                cx.error_spanned_by(&name, "`source` names a data source by its object name; this one is empty")
            }
            Arg::Source(_, name) => source = Some(name),
            Arg::Krate(path) if krate.is_some() => cx.error_spanned_by(&path, "`crate` specified more than once"),
            Arg::Krate(path) => krate = Some(path),
        }
    }
    let tx = match &krate {
        Some(path) => quote!(#path),
        None => quote!(::tegu_tx),
    };
    let propagation = propagation.unwrap_or_else(|| syn::Ident::new("Required", Span::call_site()));
    let needs = Some((quote!(dyn #tx::TxSource), source.clone(), FIX));
    let source = source.map(|name| quote!(.source(#name)));
    Some(AdviceUse {
        path: syn::parse2(quote!(#tx::Transactional)).expect("a path"),
        params: Some(quote!(#tx::TxOptions::new(#tx::Propagation::#propagation) #source)),
        fields: None,
        needs,
    })
}
