//! The only file that calls `quote!`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Kind, ProtoItem, ProtoScope, is_dyn};
use crate::attr::Access;
use crate::check;
use crate::ctxt::Ctxt;

pub(crate) fn proto(args: TokenStream, item: TokenStream, scope: ProtoScope) -> TokenStream {
    let cx = Ctxt::new();
    let model = ProtoItem::from_tokens(&cx, args, item.clone(), scope);
    if let Some(model) = &model {
        check::check(&cx, model);
    }
    finish(cx, model.as_ref().map(|m| (&m.item, m)), item, expand)
}

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

/// tegg's default object name: the type name in lowerCamelCase.
fn default_name(ident: &syn::Ident) -> String {
    let name = ident.to_string();
    let mut chars = name.trim_start_matches("r#").chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

fn expand(model: &ProtoItem) -> TokenStream {
    let default_krate = match model.scope {
        ProtoScope::Controller => quote!(::di_http),
        _ => quote!(::di_core),
    };
    let krate = model.attr.krate.clone().map_or(default_krate, |p| quote!(#p));
    let item = &model.item;
    let ident = model.ident();
    let name = model.attr.name.as_ref().map_or_else(|| default_name(ident), syn::LitStr::value);
    let (scope, scope_trait) = match model.scope {
        ProtoScope::Singleton | ProtoScope::Controller => (quote!(Singleton), quote!(SingletonProto)),
        ProtoScope::Context => (quote!(Context), quote!(ContextProto)),
    };
    let access = match model.attr.access {
        Some(Access::Private) => quote!(Private),
        _ => quote!(Public),
    };

    // Each dependency is resolved in its own `let` statement: a `?` inside the struct literal
    // would keep every earlier field's temporary alive to the end of the literal, and drop
    // elaboration of those early exits grows quadratically (400 fields: 38 s instead of 5 s).
    let lets = model.injected().enumerate().map(|(i, (field, inject))| {
        let call = match inject.kind {
            Kind::Arc => quote!(arc),
            Kind::ContextRef => quote!(context_ref),
            Kind::Optional => quote!(optional),
            Kind::All => quote!(all),
        };
        let local = format_ident!("__di_{}", field.ident);
        // Naming the type keeps type checking linear: inferred from the struct literal at the
        // end, every `let` left obligations that each later one re-walked (4000 fields: 75 s of
        // `cargo check` against 7.8 s; see benches/RESULTS.md).
        let target = &inject.target;
        quote!(let #local = __di_r.#call::<#target>(#i)?;)
    });
    let fields = model.fields.iter().map(|field| {
        let ident = &field.ident;
        match &field.inject {
            None => quote!(#ident: __di::Default::default()),
            Some(_) => {
                let local = format_ident!("__di_{}", field.ident);
                quote!(#ident: #local)
            }
        }
    });
    let deps = model.injected().map(|(field, inject)| {
        let target = &inject.target;
        let kind = match inject.kind {
            Kind::Arc => quote!(Arc),
            Kind::ContextRef => quote!(ContextRef),
            Kind::Optional => quote!(Optional),
            Kind::All => quote!(All),
        };
        let qualifier = match &inject.name {
            Some(name) => quote!(__di::Option::Some(#name)),
            None => quote!(__di::Option::None),
        };
        let field_name = field.ident.to_string();
        quote!(__di::Dependency::new::<#target>(__di::InjectKind::#kind, #qualifier).field(#field_name))
    });
    let checks = model.injected().filter(|(_, inject)| !is_dyn(&inject.target)).map(|(_, inject)| {
        let target = &inject.target;
        let assert = match (inject.kind, model.scope) {
            (Kind::ContextRef, _) => quote!(assert_context),
            (_, ProtoScope::Singleton | ProtoScope::Controller) => quote!(assert_singleton),
            (_, ProtoScope::Context) => quote!(assert_proto),
        };
        quote_spanned!(target.span()=> const _: () = __di::#assert::<#target>();)
    });
    let casts = model.attr.provides.iter().enumerate().map(|(i, ty)| {
        let cast = format_ident!("__di_provide_{}", i);
        let coerce = quote_spanned!(ty.span()=> |__di_this| __di_this);
        quote! {
            fn #cast(__di_obj: __di::AnyArc) -> __di::CastOutput {
                __di::provide::<#ident, #ty>(__di_obj, #coerce)
            }
        }
    });
    let provides = model.attr.provides.iter().enumerate().map(|(i, ty)| {
        let cast = format_ident!("__di_provide_{}", i);
        quote!(__di::Provide::new::<#ty>(#cast))
    });
    let hook = |method: &Option<syn::Ident>, fn_name: &str, setter: &str| {
        let Some(method) = method else { return (quote!(), quote!()) };
        let hook_fn = syn::Ident::new(fn_name, Span::call_site());
        let setter = syn::Ident::new(setter, Span::call_site());
        // Spanned at the method name, so a misspelled name or a wrong return type points there.
        let call = quote_spanned! {method.span()=>
            __di::hook::<#ident, _, _>(__di_obj, |__di_this: __di::Arc<#ident>| async move {
                #ident::#method(&__di_this).await
            })
        };
        (
            quote! {
                fn #hook_fn(__di_obj: __di::AnyArc) -> __di::HookFuture {
                    #call
                }
            },
            quote!(.#setter(#hook_fn)),
        )
    };
    let (init_fn, init_set) = hook(&model.attr.init, "__di_init", "init");
    let (complete_fn, complete_set) = hook(&model.attr.complete, "__di_complete", "complete");
    let (destroy_fn, destroy_set) = hook(&model.attr.destroy, "__di_destroy", "destroy");
    let controller = (model.scope == ProtoScope::Controller).then(|| {
        let path = model.attr.path.as_ref().map_or_else(String::new, syn::LitStr::value);
        // Listed outermost first, as in `tower::ServiceBuilder`: the last `.layer` wraps the rest.
        let layers = model.middleware.iter().rev();
        quote! {
            impl __di::Controller for #ident {
                const PATH: &'static str = #path;
                fn layers(__di_router: __di::Router) -> __di::Router {
                    __di_router #(.layer(#layers))*
                }
            }
        }
    });

    quote! {
        #item

        const _: () = {
            use #krate::__private as __di;

            #(#checks)*

            impl __di::Proto for #ident {
                fn descriptor() -> &'static __di::ProtoDescriptor {
                    &__DI_DESCRIPTOR
                }
            }
            impl __di::#scope_trait for #ident {}
            #controller

            fn __di_factory(__di_r: &__di::Resolver<'_>) -> __di::Result<__di::AnyArc, __di::DiError> {
                #(#lets)*
                __di::Result::Ok(__di::Arc::new(#ident { #(#fields,)* }))
            }
            #(#casts)*
            #init_fn
            #complete_fn
            #destroy_fn

            const __DI_DEPS: &[__di::Dependency] = &[#(#deps),*];
            const __DI_PROVIDES: &[__di::Provide] = &[#(#provides),*];
            const __DI_DESCRIPTOR: __di::ProtoDescriptor = __di::ProtoDescriptor::new::<#ident>(
                #name,
                __di::Scope::#scope,
                __di_factory,
                __di::cast_to::<#ident>,
            )
            .deps(__DI_DEPS)
            .provides(__DI_PROVIDES)
            .access(__di::Access::#access, __di::module_path!())
            #init_set
            #complete_set
            #destroy_set;

            __di::inventory::submit! { __DI_DESCRIPTOR }
        };
    }
}
