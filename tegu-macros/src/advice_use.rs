//! One advice as a method's attribute names it: `A` or `A(name = value, ..)`, what
//! `#[intercept]`, `#[transactional]` and `crosscut!` all produce.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

/// One advice around a method: its type, and the parameters its `Call` carries (a constant
/// expression of a type without interior mutability: `#[transactional]`'s options), or the
/// fields of its `AdviceParams` that `A(name = value)` sets.
#[derive(Clone)]
pub(crate) struct AdviceUse {
    pub(crate) path: syn::Path,
    pub(crate) params: Option<TokenStream>,
    pub(crate) fields: Option<Vec<(syn::Ident, syn::Expr)>>,
    /// What this use needs of the App besides the advice (a type, the object name it gives),
    /// and the fix when it is missing: checked by `build()` (`AdviceSite::needs`).
    pub(crate) needs: Option<(TokenStream, Option<syn::LitStr>, &'static str)>,
    /// The advice runs the rest of the call more than once (`#[transactional(retry = ..)]`):
    /// its step is a `Replay`, which clones the arguments for each run.
    pub(crate) replay: bool,
    /// What runs after the method's body, with its output as `__di_out` (a rollback rule of
    /// `#[transactional(commit_on = ..)]`, which tells the advice what it decided).
    pub(crate) epilogue: Option<TokenStream>,
}

impl AdviceUse {
    /// The parameters as a constant expression, if the use gives any.
    pub(crate) fn params(&self, di: &TokenStream) -> Option<TokenStream> {
        if let Some(params) = &self.params {
            return Some(params.clone());
        }
        let fields = self.fields.as_ref()?;
        let path = &self.path;
        let names = fields.iter().map(|(name, _)| name);
        let values = fields.iter().map(|(_, value)| value);
        let bound = quote_spanned!(path.span()=> <#path as #di::AdviceParams>);
        Some(quote! {
            {
                type __DiParams = #bound::Params;
                // The defaults fill what the use leaves out, which may be nothing.
                #[allow(clippy::needless_update)]
                let __di_params = __DiParams { #(#names: #values,)* ..*#bound::DEFAULT };
                __di_params
            }
        })
    }
}

/// `A` or `A(name = value, ..)`: an advice and the fields of its parameters. A malformed
/// advice type is reported as `usage` says; malformed parameters, by what is wrong with them.
pub(crate) fn parse_advice_use(input: syn::parse::ParseStream<'_>, usage: &str) -> syn::Result<AdviceUse> {
    let path: syn::Path = input.parse().map_err(|e| syn::Error::new(e.span(), usage))?;
    if !input.peek(syn::token::Paren) {
        return Ok(AdviceUse { path, params: None, fields: None, needs: None, replay: false, epilogue: None });
    }
    let content;
    syn::parenthesized!(content in input);
    let mut fields = Vec::new();
    while !content.is_empty() {
        let name: syn::Ident = content.parse().map_err(|e| {
            syn::Error::new(e.span(), "give the advice's parameters as `name = value`: `RateLimit(per_sec = 10)`")
        })?;
        content
            .parse::<syn::Token![=]>()
            .map_err(|e| syn::Error::new(e.span(), format!("give parameter `{name}` a value: `{name} = ..`")))?;
        let value: syn::Expr = content.parse()?;
        if fields.iter().any(|(n, _): &(syn::Ident, syn::Expr)| *n == name) {
            return Err(syn::Error::new(name.span(), format!("parameter `{name}` is given twice")));
        }
        fields.push((name, value));
        if !content.is_empty() {
            content.parse::<syn::Token![,]>()?;
        }
    }
    Ok(AdviceUse { path, params: None, fields: Some(fields), needs: None, replay: false, epilogue: None })
}
