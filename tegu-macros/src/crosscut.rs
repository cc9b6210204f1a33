//! `crosscut!(Advice(params), selector..)`: an advice declared once, run around every join point
//! it selects (the `pub async fn`s of impl blocks marked `#[intercept]`). The expansion submits
//! a `CrosscutDef` through `inventory`, with the advice's `around` erased behind a function that
//! knows its type; `tegu_core::crosscut` explains the runtime half.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;

use crate::advice_use::{AdviceUse, parse_advice_use};
use crate::internals::{path_name, private_path};

/// What `crosscut!` was given.
struct Crosscut {
    advice: AdviceUse,
    implements: Option<syn::Type>,
    module: Option<syn::LitStr>,
    types: Option<syn::LitStr>,
    methods: Option<syn::LitStr>,
    order: Option<syn::Expr>,
    krate: Option<syn::Path>,
}

const USAGE: &str = "write `crosscut!(Advice, implements = dyn Trait)`; selectors: `implements = dyn Trait`, \
                     `module = \"crate::path\"`, `types = \"*Service\"`, `methods = \"get_*|list\"`; and `order = n`";

impl Parse for Crosscut {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(Span::call_site(), USAGE));
        }
        let advice = parse_advice_use(input, USAGE)?;
        let mut cut =
            Crosscut { advice, implements: None, module: None, types: None, methods: None, order: None, krate: None };
        while !input.is_empty() {
            input.parse::<syn::Token![,]>()?;
            if input.is_empty() {
                break;
            }
            let key: syn::Ident = if input.peek(syn::Token![crate]) {
                let token: syn::Token![crate] = input.parse()?;
                syn::Ident::new("crate", token.span)
            } else {
                input.parse().map_err(|e| syn::Error::new(e.span(), USAGE))?
            };
            input
                .parse::<syn::Token![=]>()
                .map_err(|_| syn::Error::new(key.span(), format!("give `{key}` a value: `{key} = ..`")))?;
            let twice = || syn::Error::new(key.span(), format!("`{key}` is given twice"));
            match key.to_string().as_str() {
                "implements" => {
                    let ty: syn::Type = input.parse()?;
                    if !matches!(&ty, syn::Type::TraitObject(t) if t.dyn_token.is_some()) {
                        return Err(syn::Error::new(
                            ty.span(),
                            "`implements` takes a trait: `implements = dyn Audited`",
                        ));
                    }
                    if cut.implements.replace(ty).is_some() {
                        return Err(twice());
                    }
                }
                "module" | "types" | "methods" => {
                    let lit: syn::LitStr = input.parse()?;
                    check_pattern(&key.to_string(), &lit)?;
                    let slot = match key.to_string().as_str() {
                        "module" => &mut cut.module,
                        "types" => &mut cut.types,
                        _ => &mut cut.methods,
                    };
                    if slot.replace(lit).is_some() {
                        return Err(twice());
                    }
                }
                "order" => {
                    if cut.order.replace(input.parse()?).is_some() {
                        return Err(twice());
                    }
                }
                "crate" => {
                    if cut.krate.replace(input.call(syn::Path::parse_mod_style)?).is_some() {
                        return Err(twice());
                    }
                }
                _ => return Err(syn::Error::new(key.span(), format!("unknown `crosscut!` option `{key}`; {USAGE}"))),
            }
        }
        if cut.implements.is_none() && cut.module.is_none() && cut.types.is_none() && cut.methods.is_none() {
            return Err(syn::Error::new(
                cut.advice.path.span(),
                "say which methods the crosscut advises: `implements = dyn Trait`, `module = \"..\"`, `types = \"..\"` \
                 or `methods = \"..\"` (`methods = \"*\"` for all)",
            ));
        }
        Ok(cut)
    }
}

/// A module is a path (`crate::orders`); a name pattern is identifier characters, `*` and `|`.
fn check_pattern(key: &str, lit: &syn::LitStr) -> syn::Result<()> {
    let value = lit.value();
    let ok = if key == "module" {
        value.split("::").all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_alphanumeric() || c == '_'))
    } else {
        value.split('|').all(|alt| {
            let alt = alt.trim();
            !alt.is_empty() && alt.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '*')
        })
    };
    if ok {
        return Ok(());
    }
    let what = if key == "module" {
        "a module path: `module = \"crate::orders\"`"
    } else {
        "a name pattern, with `*` for any text and `|` between alternatives: `\"get_*|list\"`"
    };
    Err(syn::Error::new(lit.span(), format!("`{key}` takes {what}")))
}

pub(crate) fn crosscut(input: TokenStream) -> TokenStream {
    match syn::parse2::<Crosscut>(input) {
        Ok(cut) => expand(&cut),
        Err(err) => err.to_compile_error(),
    }
}

fn expand(cut: &Crosscut) -> TokenStream {
    let di = private_path(cut.krate.as_ref(), quote!(::tegu_core));
    let advice = &cut.advice.path;
    let advice_name = path_name(advice);
    let around = quote_spanned!(advice.span()=> <#advice as #di::Advice<#di::Outcome>>::around);
    let params = match cut.advice.params(&di) {
        Some(params) => quote!(::core::option::Option::Some(const { &#params })),
        None => quote!(::core::option::Option::None),
    };
    let implements = match &cut.implements {
        Some(ty) => {
            let name = quote!(#ty).to_string().replace(" :: ", "::");
            quote!(::core::option::Option::Some((::core::any::TypeId::of::<#ty>, #name)))
        }
        None => quote!(::core::option::Option::None),
    };
    let text = |lit: &Option<syn::LitStr>| match lit {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    };
    let (module, types, methods) = (text(&cut.module), text(&cut.types), text(&cut.methods));
    let order = cut.order.as_ref().map_or(quote!(0), |o| quote!(#o));
    quote! {
        const _: () = {
            fn __di_around<'a>(
                __di_obj: #di::AnyArc,
                __di_call: #di::Call,
                __di_rest: #di::Rest<'a>,
            ) -> ::core::pin::Pin<#di::Box<dyn ::core::future::Future<Output = #di::Outcome> + ::core::marker::Send + 'a>> {
                #di::Box::pin(async move {
                    let __di_advice = #di::downcast::<#advice>(__di_obj);
                    let mut __di_rest = ::core::pin::pin!(__di_rest);
                    #around(&*__di_advice, __di_call, #di::Next::new(__di_rest.as_mut())).await
                })
            }
            #di::assert_proto::<#advice>();
            #di::inventory::submit! {
                #di::CrosscutDef {
                    advice: ::core::any::TypeId::of::<#advice>,
                    advice_name: #advice_name,
                    params: #params,
                    implements: #implements,
                    module: #module,
                    types: #types,
                    methods: #methods,
                    order: #order,
                    around: __di_around,
                    site: ::core::module_path!(),
                    file: ::core::file!(),
                    line: ::core::line!(),
                }
            }
        };
    }
}
