//! `#[intercept(A, B)]`: on an async method, runs the advices `A` then `B` around it; on an
//! impl block, around each of its `pub async fn`s (before the method's own advices), which
//! become join points that crosscuts (`crosscut!`) may advise too. `#[intercept]` alone on an
//! impl block makes join points only.
//!
//! The method keeps its signature; its body becomes the innermost `Next` of a chain of
//! `Advice::around` calls, all generic (`tegu_core::advice` explains the runtime half).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::advice_use::{AdviceUse, parse_advice_use};
use crate::ctxt::Ctxt;
use crate::internals::{finish, private_path};

const INTERCEPT: &str = "intercept";

/// The advices of one `#[intercept(..)]` (or `#[transactional]`), outermost first.
type Advices = Vec<AdviceUse>;

pub(crate) fn intercept(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let mut krate = None;
    let advices = parse_advices(&cx, args, &mut krate);
    expand(cx, advices, krate, item)
}

/// `#[transactional(..)]` alone on a method: the chain of its one advice (and the method's
/// other `#[intercept]`s and `#[transactional]`s, in written order).
pub(crate) fn transactional(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let advices = crate::transactional::parse(&cx, args).into_iter().collect();
    if syn::parse2::<syn::ImplItemFn>(item.clone()).is_err() {
        cx.error_spanned_by(&item, "`#[transactional]` applies to an async method returning a `Result`");
        return finish(cx, None::<(&TokenStream, &TokenStream)>, item, Clone::clone);
    }
    expand(cx, advices, None, item)
}

fn expand(cx: Ctxt, advices: Advices, mut krate: Option<syn::Path>, item: TokenStream) -> TokenStream {
    let model = if let Ok(mut item) = syn::parse2::<syn::ItemImpl>(item.clone()) {
        // Crosscuts reach the methods of a type the expansion can name: not those of a trait
        // impl or of a generic impl block.
        let join = (item.trait_.is_none() && item.generics.params.is_empty() && is_plain_path(&item.self_ty))
            .then(|| (*item.self_ty).clone());
        let mut methods: Vec<&mut syn::ImplItemFn> = item
            .items
            .iter_mut()
            .filter_map(|i| match i {
                syn::ImplItem::Fn(f) => Some(f),
                _ => None,
            })
            .collect();
        let mut any = false;
        let mut chains = Vec::new();
        for method in &mut methods {
            // A `pub async fn` with a receiver: an associated function (a constructor) is
            // no method to advise.
            let public = matches!(method.vis, syn::Visibility::Public(_))
                && method.sig.asyncness.is_some()
                && matches!(method.sig.inputs.first(), Some(syn::FnArg::Receiver(_)));
            let mut chain = if public {
                any = true;
                advices.clone()
            } else {
                Vec::new()
            };
            chain.extend(take_intercepts(&cx, &mut method.attrs, &mut krate));
            chains.push((chain, public));
        }
        let di = private_path(krate.as_ref(), quote!(::tegu_core));
        for (method, (chain, public)) in methods.into_iter().zip(chains) {
            let owner = join.as_ref();
            let join = owner.filter(|_| public);
            if !chain.is_empty() || join.is_some() {
                rewrite(&cx, method, &chain, join, owner, &di);
            }
        }
        if !any {
            cx.error_spanned_by(
                &item.self_ty,
                "`#[intercept]` on an impl block applies to its `pub async fn`s; this one has none",
            );
        }
        Some(quote!(#item))
    } else {
        match syn::parse2::<syn::ImplItemFn>(item.clone()) {
            Ok(mut method) => {
                let mut chain = advices;
                chain.extend(take_intercepts(&cx, &mut method.attrs, &mut krate));
                if chain.is_empty() {
                    if !cx.has_errors() {
                        cx.push(syn::Error::new(Span::call_site(), NAME_THEM));
                    }
                } else {
                    rewrite(&cx, &mut method, &chain, None, None, &private_path(krate.as_ref(), quote!(::tegu_core)));
                }
                Some(quote!(#method))
            }
            Err(_) => {
                cx.error_spanned_by(&item, "`#[intercept]` applies to an async method, or to an impl block");
                None
            }
        }
    };
    finish(cx, model.as_ref().map(|m| (m, m)), item, Clone::clone)
}

const NAME_THEM: &str =
    "name the advices: `#[intercept(Timing, Transactional)]` (alone, `#[intercept]` goes on an impl block)";

/// Whether `ty` is a type a `static` in a method can name: a path (possibly from a
/// `macro_rules!` fragment) without `Self`, whose generic arguments, if any, are concrete (no
/// lifetime but `'static`, no `_`).
fn is_plain_path(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Group(g) => is_plain_path(&g.elem),
        syn::Type::Paren(p) => is_plain_path(&p.elem),
        syn::Type::Path(p) => {
            p.qself.is_none()
                && p.path.segments.iter().all(|s| {
                    s.ident != "Self"
                        && match &s.arguments {
                            syn::PathArguments::None => true,
                            syn::PathArguments::AngleBracketed(args) => concrete(&quote!(#args)),
                            syn::PathArguments::Parenthesized(_) => false,
                        }
                })
        }
        _ => false,
    }
}

/// Whether generic arguments name no `Self`, `_`, `impl` or lifetime but `'static`.
fn concrete(tokens: &TokenStream) -> bool {
    let mut trees = tokens.clone().into_iter().peekable();
    while let Some(tree) = trees.next() {
        match tree {
            proc_macro2::TokenTree::Ident(i) if i == "Self" || i == "_" || i == "impl" => return false,
            proc_macro2::TokenTree::Punct(p)
                if p.as_char() == '\''
                    && !matches!(trees.peek(), Some(proc_macro2::TokenTree::Ident(i)) if i == "static") =>
            {
                return false;
            }
            proc_macro2::TokenTree::Group(g) if !concrete(&g.stream()) => return false,
            _ => {}
        }
    }
    true
}

/// One entry of `#[intercept(..)]`: an advice (with its parameters), or `crate = path`.
enum Arg {
    Advice(AdviceUse),
    Krate(syn::Path),
}

const WRITE_THEM: &str = "write the advice types: `#[intercept(Timing, Transactional)]`";

impl syn::parse::Parse for Arg {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(syn::Token![crate]) && input.peek2(syn::Token![=]) {
            input.parse::<syn::Token![crate]>()?;
            input.parse::<syn::Token![=]>()?;
            let path = input.call(syn::Path::parse_mod_style).map_err(|e| syn::Error::new(e.span(), WRITE_THEM))?;
            return Ok(Arg::Krate(path));
        }
        parse_advice_use(input, WRITE_THEM).map(Arg::Advice)
    }
}

/// The entries of `#[intercept(..)]`, separated by commas.
fn parse_args(input: syn::parse::ParseStream<'_>) -> syn::Result<Vec<Arg>> {
    let mut args = Vec::new();
    while !input.is_empty() {
        args.push(input.parse()?);
        if !input.is_empty() {
            input.parse::<syn::Token![,]>().map_err(|e| syn::Error::new(e.span(), WRITE_THEM))?;
        }
    }
    Ok(args)
}

/// `A, B` (and `crate = path`, at most once in all of an item's `#[intercept]`s, into `krate`):
/// the advice types.
fn parse_advices(cx: &Ctxt, args: TokenStream, krate: &mut Option<syn::Path>) -> Advices {
    match syn::parse::Parser::parse2(parse_args, args) {
        Ok(list) => {
            let mut advices = Vec::new();
            for arg in list {
                match arg {
                    Arg::Advice(advice) => advices.push(advice),
                    Arg::Krate(path) if krate.is_some() => {
                        cx.error_spanned_by(&path, "`crate` specified more than once")
                    }
                    Arg::Krate(path) => *krate = Some(path),
                }
            }
            advices
        }
        Err(err) => {
            cx.push(err);
            Vec::new()
        }
    }
}

/// Removes the method's own `#[intercept(..)]` and `#[transactional(..)]` attributes and
/// returns their advices, in order: one expansion handles them all, so that the written order
/// is the order of the chain.
fn take_intercepts(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>, krate: &mut Option<syn::Path>) -> Advices {
    let mut advices = Vec::new();
    attrs.retain(|attr| {
        let Some(last) = attr.path().segments.last() else { return true };
        if last.ident == crate::transactional::TRANSACTIONAL {
            let args = match &attr.meta {
                syn::Meta::List(list) => list.tokens.clone(),
                _ => TokenStream::new(),
            };
            advices.extend(crate::transactional::parse(cx, args));
            return false;
        }
        if last.ident != INTERCEPT {
            return true;
        }
        match &attr.meta {
            syn::Meta::List(list) => {
                let named = parse_advices(cx, list.tokens.clone(), krate);
                if list.tokens.is_empty() {
                    cx.error_spanned_by(attr, NAME_THEM);
                }
                advices.extend(named);
            }
            _ => cx.error_spanned_by(attr, NAME_THEM),
        }
        false
    });
    advices
}

/// Rewrites `method`'s body into the chain of `advices` (outermost first) around it.
/// With `join` (the impl block's type), the method is a join point: the crosscuts that select
/// it run around that chain. `owner` is the impl block's type where a static can name it (an
/// attribute on the method alone cannot see it): `build()` checks a use where its owner is.
fn rewrite(
    cx: &Ctxt,
    method: &mut syn::ImplItemFn,
    advices: &[AdviceUse],
    join: Option<&syn::Type>,
    owner: Option<&syn::Type>,
    di: &TokenStream,
) {
    let sig = &mut method.sig;
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format!("`#[intercept]` applies to async methods; `{}` is not async", sig.ident),
        );
        return;
    }
    if !matches!(sig.inputs.first(), Some(syn::FnArg::Receiver(_))) {
        cx.error_spanned_by(&sig.ident, format!("`#[intercept]` applies to methods; `{}` takes no `self`", sig.ident));
        return;
    }
    // `&self` or `self: &T`: a shared reference, which each try can copy.
    let shared_self = matches!(
        sig.inputs.first(),
        Some(syn::FnArg::Receiver(r)) if matches!(&*r.ty, syn::Type::Reference(t) if t.mutability.is_none())
    );
    if advices.iter().any(|used| used.replay) && !shared_self {
        cx.error_spanned_by(
            &sig.inputs[0],
            format!("`#[transactional(retry = ..)]` runs `{}` again for each try: it takes `&self` (or `self: &T`), which each try can copy", sig.ident),
        );
        return;
    }
    let method_name = sig.ident.to_string();
    // A plain `name` (or `mut name`) argument keeps its name in the signature (rustdoc, and
    // attributes below this one such as `#[instrument(skip(name))]`, see it); a destructuring
    // pattern becomes `__di_aN`. The body's closure binds the original patterns, so that
    // patterns and `mut` bindings behave as they do in the method without the attribute.
    let mut names = Vec::new();
    let mut patterns = Vec::new();
    let mut labels = Vec::new();
    for (i, input) in sig.inputs.iter_mut().skip(1).enumerate() {
        let syn::FnArg::Typed(arg) = input else { continue };
        let (name, label) = match &*arg.pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => (p.ident.clone(), p.ident.to_string()),
            pat => (format_ident!("__di_a{}", i), quote!(#pat).to_string()),
        };
        labels.push(label);
        patterns.push(std::mem::replace(&mut *arg.pat, syn::parse_quote!(#name)));
        names.push(name);
    }
    let output = match &sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, ty) if contains_impl_trait(ty) => quote!(_),
        syn::ReturnType::Type(_, ty) => quote!(#ty),
    };
    let body = &method.block;
    let show = quote! {
        |__di_v, __di_f| {
            #[allow(unused_imports)]
            use #di::{ShowDebug as _, ShowOpaque as _};
            let (#(#names,)*) = __di_v;
            __di_f.debug_struct(#method_name) #(.field(#labels, (&&#di::Probe(#names)).shown()))* .finish()
        }
    };
    // Innermost first: the method's body, then each advice around what is inside it.
    // The step that `next` runs: pinned where it is made (in the method's future), reached by
    // the advice through one `dyn` reference. A rollback rule's epilogue runs after the body.
    let epilogues: Vec<&TokenStream> = advices.iter().filter_map(|used| used.epilogue.as_ref()).collect();
    // Run more than once where the innermost advice replays it: then a `Fn`.
    let body_of = match advices.last() {
        Some(used) if used.replay => quote!(#di::body_fn),
        _ => quote!(#di::body),
    };
    let mut prelude = quote! {
        let __di_b = #body_of::<#output, _, _, _>(&__di_v, move |(#(#patterns,)*)| async move #body);
    };
    if !epilogues.is_empty() {
        prelude = quote! {
            #prelude
            let __di_b = move |__di_v| async move {
                let __di_out = __di_b(__di_v).await;
                #(#epilogues)*
                __di_out
            };
        };
    }
    let mut run = quote!(__di_b);
    let mut checks = Vec::new();
    let mut sites = Vec::new();
    let mut call = quote! {
        {
            #prelude
            __di_b(__di_v).await
        }
    };
    for used in advices.iter().rev() {
        let advice = &used.path;
        let around = quote_spanned!(advice.span()=> <#advice as #di::Advice<#output>>::around);
        let this_call = match used.params(di) {
            Some(params) => quote!(__di_call.with_params(const { &#params })),
            None => quote!(__di_call),
        };
        let step = if used.replay { quote!(#di::Replay) } else { quote!(#di::Proceed) };
        call = quote! {
            {
                #prelude
                let mut __di_p = ::core::pin::pin!(#step::new(__di_v, __di_show, #run));
                let __di_c = #this_call;
                let __di_adv = #di::advice::<#advice>(__di_c);
                #around(&*__di_adv, __di_c, #di::Next::new(__di_p.as_mut())).await
            }
        };
        prelude = quote!();
        run = quote!(move |__di_v| async move #call);
        checks.push(quote_spanned!(advice.span()=> #di::assert_proto::<#advice>();));
        let advice_name = quote!(#advice).to_string().replace(' ', "");
        let owner = match owner {
            Some(ty) => quote!(::core::option::Option::Some(::core::any::TypeId::of::<#ty>)),
            None => quote!(::core::option::Option::None),
        };
        let (needs, needs_fix) = match &used.needs {
            Some((ty, name, fix)) => {
                let name = match name {
                    Some(name) => quote!(::core::option::Option::Some(#name)),
                    None => quote!(::core::option::Option::None),
                };
                (quote!(const { &[#di::Dependency::new::<#ty>(#di::InjectKind::Arc, #name)] }), *fix)
            }
            None => (quote!(&[]), ""),
        };
        sites.push(quote! {
            #di::inventory::submit! {
                #di::AdviceSite {
                    advice: ::core::any::TypeId::of::<#advice>,
                    advice_name: #advice_name,
                    module: ::core::module_path!(),
                    method: #method_name,
                    file: ::core::file!(),
                    line: ::core::line!(),
                    owner: #owner,
                    needs: #needs,
                    needs_fix: #needs_fix,
                }
            }
        });
    }
    if let Some(self_ty) = join {
        // The chain above as a function of the arguments, run alone or inside the crosscuts
        // that select this method (chosen at its first call; none costs one atomic load).
        let failed = if output.to_string() == "_" {
            quote!(::core::option::Option::None)
        } else {
            quote! {{
                #[allow(unused_imports)]
                use #di::{ShowFailed as _, ShowNoFailure as _};
                (&&#di::Probe(&__di_r)).failed()
            }}
        };
        call = quote! {
            {
                static __DI_JOIN: #di::JoinPoint = #di::JoinPoint::new(
                    ::core::any::TypeId::of::<#self_ty>,
                    ::core::any::type_name::<#self_ty>,
                    #method_name,
                    ::core::file!(),
                    ::core::line!(),
                );
                #di::inventory::submit! { #di::JoinPointSite(&__DI_JOIN) }
                let __di_chain = #di::body::<_, _, _, _>(&__di_v, move |__di_v| async move {
                    let __di_r: #output = #call;
                    let __di_f = #failed;
                    (__di_r, __di_f)
                });
                match __DI_JOIN.cuts() {
                    [] => __di_chain(__di_v).await.0,
                    // Boxed: the crosscuts' state stays out of the method's future, which
                    // then costs what the chain alone does when no crosscut selects it.
                    __di_cuts => {
                        #di::Box::pin(#di::crosscut(__di_cuts, __di_call, __di_v, __di_show, __di_chain)).await
                    }
                }
            }
        };
    }
    let block: syn::Block = syn::parse_quote! {
        {
            const _: () = {
                #(#checks)*
                #(#sites)*
            };
            let __di_call = #di::Call::new(::core::any::type_name::<Self>(), #method_name);
            let __di_v = (#(#names,)*);
            let __di_show = #di::shower(&__di_v, #show);
            #call
        }
    };
    method.block = block;
}

/// Whether `ty` mentions `impl Trait`, which the expansion cannot name.
fn contains_impl_trait(ty: &syn::Type) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut finder = Finder(false);
    syn::visit::visit_type(&mut finder, ty);
    finder.0
}
