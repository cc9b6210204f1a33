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

/// The isolation levels, as written and as `tegu_tx::Isolation` names them.
const ISOLATIONS: [(&str, &str); 3] =
    [("read_committed", "ReadCommitted"), ("repeatable_read", "RepeatableRead"), ("serializable", "Serializable")];

/// What the options say besides the propagation, in the order `TxOptions`' setters take them.
const USAGE: &str = "a propagation (`required`, the default, `requires_new`, `nested`, `mandatory` or `never`), `read_only`, `isolation = \"serializable\"` (or `\"repeatable_read\"`, `\"read_committed\"`), `timeout_ms = 5000`, `retry = 3` with `backoff_ms = 20` (`requires_new` only), `commit_on = path::to::fn`, `source = \"name\"` or `crate = path`";

/// One entry of `#[transactional(..)]`.
enum Arg {
    /// `required`, `read_only`, ...: a propagation or a flag (or a misspelt one).
    Word(syn::Ident),
    /// `source = "orders"`, `retry = 3`, `commit_on = is_declined`, ...
    Pair(syn::Ident, syn::Expr),
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
            return Ok(Arg::Pair(ident, input.parse()?));
        }
        Ok(Arg::Word(ident))
    }
}

/// What `#[transactional(..)]` says, once parsed.
#[derive(Default)]
struct Options {
    propagation: Option<syn::Ident>,
    read_only: Option<syn::Ident>,
    isolation: Option<syn::Ident>,
    timeout_ms: Option<syn::LitInt>,
    retry: Option<syn::LitInt>,
    backoff_ms: Option<syn::LitInt>,
    commit_on: Option<syn::Path>,
    source: Option<syn::LitStr>,
    krate: Option<syn::Path>,
}

/// `value` as a string literal, or an error naming `key`.
fn lit_str(cx: &Ctxt, key: &syn::Ident, value: &syn::Expr) -> Option<syn::LitStr> {
    match value {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.clone()),
        _ => {
            cx.error_spanned_by(value, format!("`{key}` takes a string: `{key} = \"...\"`"));
            None
        }
    }
}

/// `value` as a positive integer literal that fits a `u32`, or an error naming `key`.
fn lit_int(cx: &Ctxt, key: &syn::Ident, value: &syn::Expr) -> Option<syn::LitInt> {
    match value {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(n), .. }) if n.base10_parse::<u32>().is_ok_and(|n| n > 0) => {
            Some(n.clone())
        }
        _ => {
            cx.error_spanned_by(value, format!("`{key}` takes a whole number from 1 to 4294967295: `{key} = 3`"));
            None
        }
    }
}

/// Sets `slot` to `value`, or reports `key` given twice.
fn once<T>(cx: &Ctxt, key: &syn::Ident, slot: &mut Option<T>, value: Option<T>) {
    if slot.is_some() {
        cx.error_spanned_by(key, format!("`{key}` is specified more than once"));
    } else {
        *slot = value;
    }
}

impl Options {
    fn word(&mut self, cx: &Ctxt, word: syn::Ident) {
        if word == "read_only" {
            let value = Some(word.clone());
            return once(cx, &word, &mut self.read_only, value);
        }
        match PROPAGATIONS.iter().find(|(written, _)| word == written) {
            Some(_) if self.propagation.is_some() => {
                cx.error_spanned_by(&word, "the propagation is specified more than once")
            }
            Some((_, variant)) => self.propagation = Some(syn::Ident::new(variant, word.span())),
            None => cx.error_spanned_by(&word, format!("unknown option `{word}` of `#[transactional]`: {USAGE}")),
        }
    }

    fn pair(&mut self, cx: &Ctxt, key: syn::Ident, value: syn::Expr) {
        match key.to_string().as_str() {
            "source" => {
                let name = lit_str(cx, &key, &value);
                if name.as_ref().is_some_and(|n| n.value().is_empty()) {
                    return cx.error_spanned_by(&value, "`source` names a data source by its object name; this one is empty");
                }
                once(cx, &key, &mut self.source, name)
            }
            "isolation" => {
                let Some(level) = lit_str(cx, &key, &value) else { return };
                let Some((_, variant)) = ISOLATIONS.iter().find(|(written, _)| level.value() == *written) else {
                    return cx.error_spanned_by(
                        &value,
                        "unknown isolation level: `\"serializable\"`, `\"repeatable_read\"` or `\"read_committed\"`",
                    );
                };
                once(cx, &key, &mut self.isolation, Some(syn::Ident::new(variant, level.span())))
            }
            "timeout_ms" => once(cx, &key, &mut self.timeout_ms, lit_int(cx, &key, &value)),
            "retry" => once(cx, &key, &mut self.retry, lit_int(cx, &key, &value)),
            "backoff_ms" => once(cx, &key, &mut self.backoff_ms, lit_int(cx, &key, &value)),
            "commit_on" => match value {
                syn::Expr::Path(path) if path.qself.is_none() => once(cx, &key, &mut self.commit_on, Some(path.path)),
                other => cx.error_spanned_by(
                    &other,
                    "`commit_on` names a function `fn(&E) -> bool` of the method's error type: `commit_on = is_declined`",
                ),
            },
            _ => cx.error_spanned_by(&key, format!("unknown option `{key}` of `#[transactional]`: {USAGE}")),
        }
    }

    /// The rules between options: a retry only where the method owns its transaction, the
    /// options of a transaction only where the method may begin one.
    fn check(&self, cx: &Ctxt) {
        let propagation = self.propagation.as_ref().map(|p| p.to_string());
        if let Some(retry) = &self.retry
            && propagation.as_deref() != Some("RequiresNew")
        {
            cx.error_spanned_by(
                retry,
                "`retry` runs the whole method again in a new transaction, which only the transaction's owner may do: add `requires_new`, so that the method always begins its own (a `required` method may find its transaction committed after it returned, in the request's completion phase)",
            );
        }
        if let (Some(backoff), None) = (&self.backoff_ms, &self.retry) {
            cx.error_spanned_by(backoff, "`backoff_ms` is the wait before a retry: give `retry = N` too");
        }
        if let Some(p @ ("Mandatory" | "Never")) = propagation.as_deref() {
            let written = if p == "Mandatory" { "mandatory" } else { "never" };
            let begins: [(&str, Option<&dyn quote::ToTokens>); 4] = [
                ("read_only", self.read_only.as_ref().map(|t| t as &dyn quote::ToTokens)),
                ("isolation", self.isolation.as_ref().map(|t| t as &dyn quote::ToTokens)),
                ("timeout_ms", self.timeout_ms.as_ref().map(|t| t as &dyn quote::ToTokens)),
                ("commit_on", self.commit_on.as_ref().map(|t| t as &dyn quote::ToTokens)),
            ];
            for (name, at) in begins {
                if let Some(at) = at {
                    cx.error_spanned_by(
                        at,
                        format!("`{name}` is about a transaction the method begins, and a `{written}` method never begins one"),
                    );
                }
            }
        }
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
    let mut options = Options::default();
    for arg in list {
        match arg {
            Arg::Word(word) => options.word(cx, word),
            Arg::Pair(key, value) => options.pair(cx, key, value),
            Arg::Krate(path) if options.krate.is_some() => {
                cx.error_spanned_by(&path, "`crate` specified more than once")
            }
            Arg::Krate(path) => options.krate = Some(path),
        }
    }
    options.check(cx);
    let tx = match &options.krate {
        Some(path) => quote!(#path),
        None => quote!(::tegu_tx),
    };
    let propagation = options.propagation.unwrap_or_else(|| syn::Ident::new("Required", Span::call_site()));
    let needs = Some((quote!(dyn #tx::TxSource), options.source.clone(), FIX));
    let source = options.source.map(|name| quote!(.source(#name)));
    let read_only = options.read_only.map(|_| quote!(.read_only()));
    let isolation = options.isolation.map(|level| quote!(.isolation(#tx::Isolation::#level)));
    let timeout = options.timeout_ms.map(|ms| quote!(.timeout(::core::time::Duration::from_millis(#ms))));
    let replay = options.retry.is_some();
    let retry = options.retry.map(|tries| {
        let backoff = options.backoff_ms.map_or_else(|| quote!(#tx::Retry::BACKOFF_MS), |ms| quote!(#ms));
        quote!(.retry(#tx::Retry::new(#tries, ::core::time::Duration::from_millis(#backoff))))
    });
    let rules = options.commit_on.as_ref().map(|_| quote!(.commit_on_rule()));
    let epilogue = options.commit_on.map(|rule| {
        quote! {
            if let ::core::result::Result::Err(__di_e) = &__di_out {
                if #rule(__di_e) {
                    #tx::__private::commit_despite_error();
                }
            }
        }
    });
    Some(AdviceUse {
        path: syn::parse2(quote!(#tx::Transactional)).expect("a path"),
        params: Some(
            quote!(#tx::TxOptions::new(#tx::Propagation::#propagation) #source #read_only #isolation #timeout #retry #rules),
        ),
        fields: None,
        needs,
        replay,
        epilogue,
    })
}
