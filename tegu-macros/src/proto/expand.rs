//! The expansion of the proto attributes. `#[http_routes]` expands in `http/expand.rs`, `#[intercept]`
//! in `intercept.rs`, `#[handlers]` in `handlers.rs`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;
use crate::internals::{finish, private_path, respan};
use crate::proto::ast::{Body, Kind, ProtoItem};
use crate::proto::attr::{Access, ProtoScope};
use crate::proto::check;

pub(crate) fn proto(args: TokenStream, item: TokenStream, scope: ProtoScope) -> TokenStream {
    let cx = Ctxt::new();
    let model = ProtoItem::from_tokens(&cx, args, item.clone(), scope);
    if let Some(model) = &model {
        check::check(&cx, model);
    }
    finish(cx, model.as_ref().map(|m| (&m.body, m)), item, expand)
}

fn expand(model: &ProtoItem) -> TokenStream {
    let runtime = match model.scope {
        ProtoScope::Controller => quote!(::tegu_http),
        _ => quote!(::tegu_core),
    };
    let di = private_path(model.attr.krate.as_ref(), runtime.clone());
    // The runtime's public items by their public path, two tokens shorter than through
    // `__private` (each token of a large crate's expansion costs every rebuild).
    // A controller's runtime, `tegu_http`, re-exports them only there.
    let rt = match (model.scope, &model.attr.krate) {
        (ProtoScope::Controller, _) => di.clone(),
        (_, Some(krate)) => quote!(#krate),
        (_, None) => runtime,
    };
    let item = &model.body;
    let self_ty = model.self_ty();
    let scope_trait = match model.scope {
        ProtoScope::Singleton | ProtoScope::Controller | ProtoScope::Config => quote!(SingletonProto),
        ProtoScope::Context => quote!(ContextProto),
        ProtoScope::Transient => quote!(TransientProto),
    };
    // A public proto's crate is its type's (`ProtoDescriptor::access`): said only when private.
    let access_set = matches!(model.attr.access, Some(Access::Private))
        .then(|| quote!(.access(#di::Access::Private, #di::module_path!())));

    let fields: Vec<FieldParts> =
        model.injected().map(|(label, inject)| field_parts(model, label, inject, &di, &rt)).collect();
    let deps: Vec<_> = fields.iter().map(|f| &f.dep).collect();
    // The bounds that no `dep_..` call checks, as calls in one constant: each item costs the
    // compiler time in a large project, and a bound's error is reported for each call
    // all the same. The `NEEDS_ASYNC` checks panic in const evaluation, which stops at the
    // first: one item each.
    let asserts: Vec<_> = fields.iter().filter_map(|f| f.assert.as_ref()).collect();
    let sync_checks = fields.iter().filter_map(|f| f.sync_check.as_ref());
    let checks = (!asserts.is_empty()).then(|| quote!(const _: () = { #(#asserts)* };));
    let needs_async = needs_async(model, &rt);
    let by_value: Vec<_> = fields.iter().filter_map(|f| f.by_value.as_ref()).collect();
    // A context proto's type that implements `Travels` is a lineage type, declared with
    // `lineage_type!`: refused at its name (`__private::LineageProbe`), in the factory with the
    // other probes (no item of its own).
    let lineage_probe = matches!(model.scope, ProtoScope::Context).then(|| {
        let (span, self_ty) = (model.ident().span(), model.self_ty());
        let di = respan(&di, span);
        quote_spanned! {span=>
            #[allow(unused_imports)]
            use #di::{LineageProbeTravels as _, LineageProbeOther as _};
            (&&#di::LineageProbe::<#self_ty>::NEW).__di_lineage();
        }
    });
    let by_value_probes = (!by_value.is_empty()).then(|| {
        quote! {
            #[allow(unused_imports)]
            use #di::{ByValueSingleton as _, ByValueContext as _, ByValueTransient as _, ByValueOther as _};
            #(#by_value)*
        }
    });
    let probes = match (by_value_probes, lineage_probe) {
        (None, None) => None,
        (a, b) => Some(quote!(#a #b)),
    };
    let Uninjected { values: uninjected, refused, unmarked } = uninjected_fields(model, &di);
    let Factory { item: factory, method, constructor } = factory(model, &di, &rt, probes, &uninjected);
    // A cast per provided type: the downcast and the coercion, spanned at the type so that a
    // trait the proto does not implement is reported there. No generic helper per proto.
    let casts = model.attr.provides.iter().enumerate().map(|(i, ty)| {
        let cast = format_ident!("__di_provide_{}", i);
        // The closure's parameter and body share the type's span, so they resolve to each other
        // whatever context that span has (a `macro_rules!` argument).
        let di_at = respan(&di, ty.span());
        let coerce = quote_spanned!(ty.span()=> |__di_this: #di_at::Arc<#self_ty>| -> #di_at::Arc<#ty> { __di_this });
        quote! {
            fn #cast<__DiGen>(__di_obj: #di::AnyArc, __di_out: #di::CastOut<'_>) {
                let __di_coerce = #coerce;
                #di::put::<#ty>(__di_out, __di_coerce(#di::downcast::<#self_ty>(__di_obj)))
            }
        }
    });
    let provides = model.attr.provides.iter().enumerate().map(|(i, ty)| {
        let cast = format_ident!("__di_provide_{}", i);
        quote!(#di::Provide::new::<#ty>(#cast::<()>))
    });
    let hook = |method: &Option<syn::Ident>, fn_name: &str, setter: &str| {
        let Some(method) = method else { return (quote!(), None) };
        let hook_fn = syn::Ident::new(fn_name, Span::call_site());
        let setter = syn::Ident::new(setter, Span::call_site());
        // Spanned at the method name, so a misspelled name or a wrong return type points there;
        // the locals are made at the call site, so that they resolve whatever that span is.
        // One function and one async block per hook, no generic helper: code per proto is what
        // a large project's build spends its time on.
        let this = quote!(__di_this);
        let di_at = respan(&di, method.span());
        let call = quote_spanned! {method.span()=> #di_at::hook_result(<#self_ty>::#method(&#this).await)};
        (
            quote! {
                fn #hook_fn<__DiGen>(__di_obj: #di::AnyArc) -> #di::UnitFuture {
                    let #this = #di::downcast::<#self_ty>(__di_obj);
                    #di::Box::pin(async move { #call })
                }
            },
            Some(quote!(.#setter(#hook_fn::<()>))),
        )
    };
    let (init_fn, init_set) = hook(&model.attr.init, "__di_init", "init");
    let (complete_fn, complete_set) = hook(&model.attr.complete, "__di_complete", "complete");
    let (destroy_fn, destroy_set) = hook(&model.attr.destroy, "__di_destroy", "destroy");
    let profile_set = model.attr.profile.as_ref().map(|p| quote!(.profile(#p)));
    let instances_of_set = model.attr.instances_of.as_ref().map(|c| quote!(.instances_of::<#c>()));
    let lazy_set = model.attr.lazy.as_ref().map(|_| quote!(.lazy()));
    let order_set = model.attr.order.map(|order| quote!(.order(#order)));
    // A `TenantRef<F>` is a singleton each holder brings along (once per App), spanned at `F`
    // so that an `F` that is no `TenantObjects` is reported there.
    let tenants: Vec<_> = model
        .injected()
        .filter(|(_, inject)| inject.kind == Kind::TenantRef)
        .map(|(_, inject)| {
            let target = &inject.target;
            let di = respan(&di, target.span());
            quote_spanned!(target.span()=> #di::ProtoDef::tenants::<#target> as fn() -> #di::ProtoDef)
        })
        .collect();
    let also_set = (!tenants.is_empty()).then(|| quote!(.also(&[#(#tenants),*])));
    let controller = (model.scope == ProtoScope::Controller).then(|| {
        let path = model.attr.path.as_ref().map_or_else(String::new, syn::LitStr::value);
        // Listed outermost first, as in `tower::ServiceBuilder`: the last `.layer` wraps the rest.
        let layers = model.middleware.iter().rev();
        quote! {
            impl #di::Controller for #self_ty {
                const PATH: &'static str = #path;
                fn layers(__di_router: #di::Router) -> #di::Router {
                    __di_router #(.layer(#layers))*
                }
            }
        }
    });

    let needs_async = needs_async.map(|n| quote!(const NEEDS_ASYNC: bool = #n;));
    // `Dependency` has drop glue, so its array is not promoted: an inline constant makes it
    // `'static` (and costs no item of its own).
    // An empty list is the descriptor's default: not said (each call costs every proto's build).
    let deps_set = (!deps.is_empty()).then(|| quote!(.deps(const { &[#(#deps),*] })));
    // `Unmarked` has no drop glue: its array is promoted.
    let unmarked_set = (!unmarked.is_empty()).then(|| quote!(.unmarked(&[#(#unmarked),*])));
    let provides: Vec<_> = provides.collect();
    let provides_set = (!provides.is_empty()).then(|| quote!(.provides(const { &[#(#provides),*] })));

    // What the descriptor says beyond its constructor, in the order it is applied: each part
    // only where it differs from the default.
    let setters: Vec<TokenStream> = [
        deps_set,
        unmarked_set,
        provides_set,
        access_set,
        profile_set,
        instances_of_set,
        lazy_set,
        order_set,
        also_set,
        init_set,
        complete_set,
        destroy_set,
    ]
    .into_iter()
    .flatten()
    .collect();
    // A singleton built by its sync factory, with nothing else to say (no dependency, option or
    // name), takes `Proto::DESCRIPTOR`'s default, which names `Proto::__di_factory`: a constant
    // fewer per proto, a twentieth of a large crate's debug build.
    let default_descriptor = method
        && matches!(model.scope, ProtoScope::Singleton | ProtoScope::Controller)
        && model.attr.name.is_none()
        && setters.is_empty();
    // The constructor records where it is called (`#[track_caller]`): spanned at the proto's
    // name, so that `build()`'s errors point at the declaration.
    let constructor = respan(&constructor, model.ident().span());
    let descriptor = (!default_descriptor).then(|| {
        quote! {
            const DESCRIPTOR: #di::ProtoDescriptor = #constructor #(#setters)*;
        }
    });
    let (method_factory, free_factory) = if method { (factory, quote!()) } else { (quote!(), factory) };

    // The descriptor is the `Proto` impl's constant, and the registration (`register!`: the
    // scope marker's impl, and a `static` in a link section, or an `inventory` entry where there
    // is none, named after the type) copies it: no other item per proto, since each one costs a
    // large project's build time. What the macros write per proto and per field
    // is kept short too: every token costs each rebuild, which expands the whole crate again
    // (public items by their public path, `#rt::Proto`; `dep_singleton::<T>(..)` both checks
    // and declares a field; docs/decisions.md, "Fewer tokens per proto and per field").
    //
    // The functions (factory, casts, hooks) take an unused type parameter and are used as
    // `f::<()>`: an incremental build compiles a module's generic code in a codegen unit of its
    // own, so editing the user's code in the module recompiles none of ours (a one-body edit in
    // a module of 1000 protos: LLVM's work halves; see docs/decisions.md).
    let registration = format_ident!("__DI_PROTO_{}", model.ident);
    let impls = quote! {
        #checks
        #(#refused)*
        #(#sync_checks)*
        impl #rt::Proto for #self_ty {
            #needs_async
            #descriptor
            #method_factory
        }
        #controller
        #di::register!(#self_ty, #registration, #scope_trait);
    };
    // Every path is written in full (`#rt::Proto`, `#di::Made`), so no `use` is needed, and only
    // free functions, whose names are fixed, need a block to keep them apart from the next proto's:
    // most protos of a large crate (a sync factory, no `provides`, no hook) have none. Two items
    // fewer per proto (docs/decisions.md, "A proto with only trait impls expands without a
    // block").
    let free_fns = quote! {
        #free_factory
        #(#casts)*
        #init_fn
        #complete_fn
        #destroy_fn
    };
    if free_fns.is_empty() {
        quote!(#item #impls)
    } else {
        quote! {
            #item
            const _: () = {
                #impls
                #free_fns
            };
        }
    }
}

/// What one injected field adds to the expansion.
struct FieldParts {
    /// Its entry in the descriptor's dependencies.
    dep: TokenStream,
    /// Its trait-bound check (`check::Bound`), where `dep` does not make it.
    assert: Option<TokenStream>,
    /// A `ContextRef<T>`'s check that `T` is not built asynchronously.
    sync_check: Option<TokenStream>,
    /// A singleton's by-value dependency: the check, in its factory, that it is a singleton
    /// (`__private::ByValue`), which names the handle to hold a context or transient proto by.
    by_value: Option<TokenStream>,
}

/// The parts of field `label`. Where the field names no object and injects its bound's own
/// kind (`Arc<T>` in a singleton, `ContextRef<T>`, `Provider<T>`), one call both declares and
/// checks it (`dep_singleton::<T>("label")`, spanned at `T`, so that a bound's error points
/// there): each token of a large crate's expansion costs every rebuild.
fn field_parts(
    model: &ProtoItem,
    label: &syn::Ident,
    inject: &crate::proto::ast::Inject,
    di: &TokenStream,
    rt: &TokenStream,
) -> FieldParts {
    let checked = &inject.target;
    let bound = check::bound(inject, model.scope.is_singleton());
    let label = label.to_string();
    // The holder may call `get()`: `build()` refuses a target built asynchronously (the
    // compile-time check below covers a proto's type, not a `dyn Trait`).
    let sync = check::sync_reference(inject.kind);
    let sync_only = sync.then(|| quote!(.sync_only()));
    let sync_check = (sync && bound.is_some()).then(|| {
        let shown = type_text(checked);
        let message = format!(
            "`{shown}` is built asynchronously (an async constructor or init hook, its own or a by-value dependency's), so `ContextRef::get` could not return it: hold `AsyncContextRef<{shown}>` and call `get_async().await`"
        );
        quote_spanned!(checked.span()=> const _: () = if <#checked as #rt::Proto>::NEEDS_ASYNC { ::core::panic!(#message) };)
    });
    let at = |path: &TokenStream| respan(path, checked.span());
    let by_value_kind = matches!(inject.kind, Kind::Arc | Kind::Optional | Kind::All);
    let by_value = (bound == Some(check::Bound::Singleton) && by_value_kind).then(|| {
        let di = at(di);
        quote_spanned!(checked.span()=> (&&&&#di::ByValue::<#checked>::NEW).__di_by_value();)
    });
    if let Some(bound) = bound.filter(|b| inject.name.is_none() && b.declares(inject.kind)) {
        let (di, dep) = (at(di), bound.function("dep"));
        return FieldParts {
            dep: quote_spanned!(checked.span()=> #di::#dep::<#checked>(#label) #sync_only),
            assert: None,
            sync_check,
            by_value,
        };
    }
    let assert = bound.map(|bound| {
        // A singleton's by-value dependency need only be a proto here: `ByValue`, in the
        // factory, says which handle a context or transient proto is held by.
        let (di, assert) = match bound {
            check::Bound::Singleton if by_value_kind => (at(di), format_ident!("assert_proto")),
            _ => (at(di), bound.function("assert")),
        };
        quote_spanned!(checked.span()=> #di::#assert::<#checked>();)
    });
    // A `ConfigRef<T>` is a singleton the live configuration registers, taken by `Arc`.
    let target = match inject.kind {
        Kind::ConfigRef => quote!(#di::ConfigRef<#checked>),
        Kind::TenantRef => quote!(#di::TenantRef<#checked>),
        _ => quote!(#checked),
    };
    let kind = match inject.kind {
        Kind::Arc | Kind::ConfigRef | Kind::TenantRef => quote!(Arc),
        Kind::ContextRef | Kind::AsyncContextRef => quote!(ContextRef),
        Kind::Optional => quote!(Optional),
        Kind::All => quote!(All),
        Kind::Keyed => quote!(Keyed),
        Kind::Provider => quote!(Provider),
    };
    // Most fields name no object: `dep`, the short form. Spanned at the field's type, which
    // the dependency records as its site.
    let dep = match &inject.name {
        Some(name) => {
            quote!(#di::Dependency::new::<#target>(#di::InjectKind::#kind, #di::Option::Some(#name)).field(#label) #sync_only)
        }
        None => quote!(#di::dep::<#target>(#di::InjectKind::#kind, #label) #sync_only),
    };
    let dep = respan(&dep, checked.span());
    FieldParts { dep, assert, sync_check, by_value }
}

/// `Proto::NEEDS_ASYNC`: whether a scope must build this proto asynchronously. A context
/// proto's own async constructor or init hook, or a by-value dependency that needs it;
/// `None` (the trait's default, `false`) for singletons, which exist before any scope. Trait
/// objects and `external` dependencies are unknown here: the run-time check covers them.
fn needs_async(model: &ProtoItem, rt: &TokenStream) -> Option<TokenStream> {
    if !matches!(model.scope, ProtoScope::Context | ProtoScope::Transient) {
        return None;
    }
    let own = model.attr.init.is_some() || model.ctor().is_some_and(|c| c.is_async);
    let deps =
        model.injected().filter(|(_, inject)| inject.kind.by_value() && check::checked(inject)).map(|(_, inject)| {
            let target = &inject.target;
            quote!(<#target as #rt::Proto>::NEEDS_ASYNC)
        });
    Some(quote!(#own #(|| #deps)*))
}

/// How a proto is built: its factory function, and the descriptor constructor that names it.
struct Factory {
    /// The factory (none for a configuration section).
    item: TokenStream,
    /// Whether it is `Proto::__di_factory`, in the `Proto` impl (a sync factory), or a
    /// function of its own beside it (an async one, whose signature differs).
    method: bool,
    /// `ProtoDescriptor::new(..)` or its async or configuration form.
    constructor: TokenStream,
}

/// What a struct's fields without `#[inject]` add to the expansion.
struct Uninjected {
    /// Their values, in order (`None` for an injected field).
    values: Vec<Option<TokenStream>>,
    /// The compile errors of those that only the container can fill.
    refused: Vec<TokenStream>,
    /// The descriptor's record of those that hold a type the App may have registered by hand
    /// (`__private::unmarked::<T>("field")`), which `build()` refuses where it has.
    unmarked: Vec<TokenStream>,
}

/// The values of a struct's fields without `#[inject]`, in order (`None` for an injected
/// one), the compile errors of those that only the container can fill, and the record of those
/// that hold a type the App may have (`ast::unmarked_target`).
///
/// - `#[inject(skip)]`: `__private::Skipped`, which is `Default::default()`, or an error that
///   names the attribute where the type has no `Default`.
/// - An injection form that `Default` cannot mean (`ContextRef`, `Provider`, `Arc<dyn Trait>`,
///   `Option<Arc<T>>`, ...): an error at the field that says to mark it `#[inject]`; the field's
///   value is `refused_field()`, so that no second error follows.
/// - Anything else: `__private::FieldProbe`, which is `Default::default()` except for an `Arc`
///   of a proto (an error: it would be a second instance), a proto in a `Box`, an `Option` or a
///   `Weak`, or a type with no `Default` (an error that says to inject it or implement
///   `Default`). One that holds a named type (`Arc<T>`, `Box<T>`, ...) is recorded too: `build()`
///   refuses it where the App has a `T` registered by hand, which no `Proto` impl shows here.
fn uninjected_fields(model: &ProtoItem, di: &TokenStream) -> Uninjected {
    let mut out = Uninjected { values: Vec::new(), refused: Vec::new(), unmarked: Vec::new() };
    let Body::Struct { fields, .. } = &model.body else { return out };
    if model.scope == ProtoScope::Config {
        return out;
    }
    for field in fields {
        if field.inject.is_some() {
            out.values.push(None);
            continue;
        }
        let ty = &field.ty;
        let di_at = respan(di, ty.span());
        if field.skip {
            out.values.push(Some(quote_spanned!(ty.span()=> <#ty as #di_at::Skipped>::skipped())));
            continue;
        }
        if let Some(message) = check::uninjected_form(field) {
            out.refused.push(quote_spanned!(ty.span()=> ::core::compile_error!(#message);));
            out.values.push(Some(quote_spanned!(ty.span()=> #di_at::refused_field::<#ty>())));
            continue;
        }
        if let Some(target) = crate::proto::ast::unmarked_target(ty) {
            let label = field.ident.to_string();
            out.unmarked.push(quote!(#di::unmarked::<#target>(#label)));
        }
        out.values.push(Some(quote_spanned! {ty.span()=> {
            #[allow(unused_imports)]
            use #di_at::{ProtoField as _, OptionField as _, VecField as _, ValueField as _, WrappedField as _, HandleField as _, DefaultField as _, PlainField as _};
            (&&&#di_at::FieldProbe::<#ty>::NEW).__di_field()
        }}));
    }
    out
}

/// The factory function and the descriptor constructor that takes it.
fn factory(
    model: &ProtoItem,
    di: &TokenStream,
    rt: &TokenStream,
    probes: Option<TokenStream>,
    uninjected: &[Option<TokenStream>],
) -> Factory {
    let ident = model.ident();
    let self_ty = model.self_ty();
    // No name given: an empty one, which tegu-core reads as the type's default name
    // (`registry::default_name`, lowerCamelCase), so that the rule is written once.
    let name = model.attr.name.as_ref().map_or_else(String::new, syn::LitStr::value);
    let scope = match model.scope {
        ProtoScope::Context => quote!(Context),
        ProtoScope::Transient => quote!(Transient),
        _ => quote!(Singleton),
    };
    if model.scope == ProtoScope::Config {
        let prefix = model.attr.prefix.as_ref().map_or_else(String::new, syn::LitStr::value);
        let instances = model.attr.instances.is_some();
        let reloadable = model.attr.reloadable.as_ref().map(|_| quote!(.reloadable::<#self_ty>()));
        // `load_section::<T>` requires `T: Deserialize`, which is the check.
        return Factory {
            item: quote!(),
            method: false,
            constructor: quote!(#di::ProtoDescriptor::config::<#self_ty>(#name, #prefix, #instances, #di::load_section::<#self_ty>) #reloadable),
        };
    }
    // Each dependency is resolved in its own `let` statement: a `?` inside the struct literal
    // would keep every earlier field's temporary alive to the end of the literal, and drop
    // elaboration of those early exits grows quadratically (400 fields: 38 s instead of 5 s).
    // Named by position: a name built from the field's could break a lint (`_x` gives `__di__x`).
    let locals: Vec<syn::Ident> = (0..model.injected().count()).map(|i| format_ident!("__di_dep{}", i)).collect();
    // The `Arc`s of protos' own types come first, all at once: one call that is not generic
    // looks up their objects (so each dependency costs its factory no lookup code of its own),
    // then `Own::take` makes each an `Arc<T>`, inline (the request path runs no function per
    // dependency type). The others follow, in order.
    let owns: Vec<(usize, &syn::Ident, &syn::Type)> = model
        .injected()
        .zip(&locals)
        .enumerate()
        .filter(|(_, ((_, inject), _))| own_type(inject))
        .map(|(i, ((_, inject), local))| (i, local, &inject.target))
        .collect();
    let fill = (!owns.is_empty()).then(|| {
        let count = owns.len();
        let indices = owns.iter().map(|(i, _, _)| i);
        // Each taken out of its place, which stays in the array, emptied (`Own::take`).
        let takes = owns
            .iter()
            .enumerate()
            .map(|(k, (_, local, target))| quote!(let #local = __di_objs[#k].take::<#target>();));
        quote! {
            let mut __di_objs: [#di::Own; #count] = [const { #di::Own::EMPTY }; #count];
            #di::fill(__di_r, &[#(#indices),*], &mut __di_objs)?;
            #(#takes)*
        }
    });
    let others = model.injected().zip(&locals).enumerate().filter(|(_, ((_, inject), _))| !own_type(inject)).map(
        |(i, ((_, inject), local))| {
            let target = &inject.target;
            if inject.kind == Kind::ConfigRef {
                return quote!(let #local = #di::ConfigRef::clone(&*__di_r.arc::<#di::ConfigRef<#target>>(#i)?););
            }
            if inject.kind == Kind::TenantRef {
                return quote!(let #local = #di::TenantRef::clone(&*__di_r.arc::<#di::TenantRef<#target>>(#i)?););
            }
            let call = match inject.kind {
                Kind::Arc | Kind::ConfigRef | Kind::TenantRef => quote!(arc),
                Kind::ContextRef => quote!(context_ref),
                Kind::AsyncContextRef => quote!(async_context_ref),
                Kind::Optional => quote!(optional),
                Kind::All => quote!(all),
                Kind::Keyed => quote!(keyed),
                Kind::Provider => quote!(provider),
            };
            // Naming the type keeps type checking linear: inferred from the struct literal at
            // the end, every `let` left obligations that each later one re-walked (4000 fields:
            // 75 s of `cargo check` against 7.8 s; see benches/RESULTS.md).
            quote!(let #local = __di_r.#call::<#target>(#i)?;)
        },
    );
    let lets = probes.into_iter().chain(fill).chain(others);
    match &model.body {
        Body::Struct { fields, .. } => {
            let mut next = locals.iter();
            let fields = fields.iter().zip(uninjected).map(|(field, value)| {
                let ident = &field.ident;
                match (value, field.inject.as_ref().and_then(|_| next.next())) {
                    (_, Some(local)) => quote!(#ident: #local),
                    (Some(value), None) => quote!(#ident: #value),
                    (None, None) => unreachable!("an injected field has its local"),
                }
            });
            Factory {
                item: quote! {
                    fn __di_factory<__DiGen>(__di_r: &#rt::Resolver<'_>) -> #di::Made {
                        #(#lets)*
                        Self::__di_made(#ident { #(#fields,)* })
                    }
                },
                method: true,
                constructor: quote!(#di::ProtoDescriptor::new::<#self_ty>(#name, #di::Lifetime::#scope, Self::__di_factory::<()>)),
            }
        }
        Body::Impl { .. } => {
            let Some(ctor) = model.ctor() else { unreachable!("a constructor-less impl block is an error") };
            let ctor_ident = &ctor.ident;
            // Spanned at the constructor, so a wrong return type points there.
            let call = quote_spanned!(ctor_ident.span()=> <#self_ty>::#ctor_ident(#(#locals),*));
            if ctor.is_async {
                let di = respan(di, ctor_ident.span());
                let construct = quote_spanned!(ctor_ident.span()=> #di::construct_async::<#self_ty, _>(#call));
                Factory {
                    item: quote! {
                        fn __di_factory<__DiGen>(__di_r: &#rt::Resolver<'_>) -> #di::Result<#di::BuildFuture, #rt::DiError> {
                            #(#lets)*
                            #di::Result::Ok(#construct)
                        }
                    },
                    method: false,
                    constructor: quote!(#di::ProtoDescriptor::new_async::<#self_ty>(#name, #di::Lifetime::#scope, __di_factory::<()>)),
                }
            } else {
                // `__di_r` is made here, at the call site: spanned at the constructor, it would not
                // resolve when the constructor's name comes from a `macro_rules!` argument.
                let resolver = quote!(__di_r);
                let di = respan(di, ctor_ident.span());
                let construct = quote_spanned!(ctor_ident.span()=> #di::constructed::<#self_ty>(#resolver, #call));
                Factory {
                    item: quote! {
                        fn __di_factory<__DiGen>(__di_r: &#rt::Resolver<'_>) -> #di::Made {
                            #(#lets)*
                            #construct
                        }
                    },
                    method: true,
                    constructor: quote!(#di::ProtoDescriptor::new::<#self_ty>(#name, #di::Lifetime::#scope, Self::__di_factory::<()>)),
                }
            }
        }
    }
}

/// Whether dependency `inject` is fetched with the others of its kind (see `factory`): an `Arc`
/// of a proto's own type.
fn own_type(inject: &crate::proto::ast::Inject) -> bool {
    inject.kind == Kind::Arc && check::checked(inject)
}

/// A type as a message shows it: `crate::Db`, not `crate :: Db`.
fn type_text(ty: &syn::Type) -> String {
    let text = quote!(#ty).to_string();
    text.replace(" :: ", "::").replace(" < ", "<").replace(" >", ">").replace("< ", "<")
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::proto::attr::ProtoScope;

    fn expanded(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        super::proto(args, item, ProtoScope::Singleton).to_string()
    }

    #[test]
    fn a_proto_with_only_trait_impls_has_no_block_and_no_import() {
        let out = expanded(
            quote!(),
            quote!(
                pub struct Clock;
            ),
        );
        assert!(!out.contains("const _") && !out.contains(" use "), "{out}");
        assert!(out.contains("impl :: tegu_core :: Proto for Clock"), "{out}");
        assert!(
            out.contains(":: tegu_core :: __private :: register ! (Clock , __DI_PROTO_Clock , SingletonProto)"),
            "{out}"
        );
    }

    /// Every token of the expansion costs each rebuild of a large crate: a proto with
    /// nothing to say writes its `Proto` impl with the factory and its registration, no more.
    #[test]
    fn a_proto_without_options_expands_to_few_tokens() {
        let out = super::proto(
            quote!(),
            quote!(
                pub struct Clock;
            ),
            ProtoScope::Singleton,
        );
        let tokens = count(out.clone());
        assert!(tokens <= 75, "{tokens} tokens: {out}");
    }

    /// Tokens as the compiler counts them: a group is its delimiters and what is inside.
    fn count(ts: proc_macro2::TokenStream) -> usize {
        ts.into_iter()
            .map(|tree| match tree {
                proc_macro2::TokenTree::Group(g) => 2 + count(g.stream()),
                _ => 1,
            })
            .sum()
    }

    /// A field without `#[inject]` that holds a named type (`Arc<T>`, `Box<T>`, ...) is
    /// recorded in the descriptor, which `build()` checks against the App's protos; other
    /// fields add nothing to it.
    #[test]
    fn an_unmarked_arc_is_recorded_and_plain_state_is_not() {
        let plain = super::proto(
            quote!(),
            quote!(
                pub struct Stats {
                    served: AtomicU64,
                    names: Option<String>,
                    tag: Arc<str>,
                }
            ),
            ProtoScope::Singleton,
        );
        assert!(!plain.to_string().contains("unmarked") && !plain.to_string().contains("DESCRIPTOR"), "{plain}");
        let out = super::proto(
            quote!(),
            quote!(
                pub struct Fetcher {
                    client: Arc<HttpClient>,
                }
            ),
            ProtoScope::Singleton,
        );
        let text = out.to_string();
        assert!(
            text.contains(". unmarked (& [:: tegu_core :: __private :: unmarked :: < HttpClient > (\"client\")])"),
            "{text}"
        );
        // The record is 24 tokens (each further one 18 and its type's), and a proto that had
        // nothing else to declare writes its descriptor constant for it (58 more): 249 in all.
        let tokens = count(out);
        assert!(tokens <= 250, "{tokens} tokens: {text}");
    }

    #[test]
    fn a_field_is_declared_and_checked_by_one_call() {
        let out = expanded(
            quote!(),
            quote!(
                pub struct Greeter {
                    #[inject]
                    clock: Arc<Clock>,
                    #[inject(name = "utc")]
                    utc: Arc<Clock>,
                }
            ),
        );
        // The unnamed field: one call that declares it and checks it is a proto; the named
        // one: the long form, and its check in the one constant of checks.
        assert!(out.contains(":: tegu_core :: __private :: dep_singleton :: < Clock > (\"clock\")"), "{out}");
        assert!(out.contains("Dependency :: new :: < Clock > (:: tegu_core :: __private :: InjectKind :: Arc , :: tegu_core :: __private :: Option :: Some (\"utc\")) . field (\"utc\")"), "{out}");
        assert_eq!(out.matches("assert_proto").count(), 1, "{out}");
        // Each by-value dependency of a singleton is checked to be a singleton in the factory.
        assert_eq!(out.matches("ByValue :: < Clock > :: NEW").count(), 2, "{out}");
        assert!(out.contains("__di_objs [0usize] . take :: < Clock > ()"), "{out}");
    }

    #[test]
    fn free_functions_keep_the_block_and_a_crate_path_is_written_in_full() {
        let out = expanded(
            quote!(init = start, crate = my::di),
            quote!(
                pub struct Clock;
            ),
        );
        assert!(out.contains("const _ : () = {") && out.contains("fn __di_init"), "{out}");
        assert!(out.contains("impl my :: di :: Proto for Clock"), "{out}");
        assert!(
            out.contains("my :: di :: __private :: register ! (Clock , __DI_PROTO_Clock , SingletonProto) ;"),
            "{out}"
        );
        assert!(!out.contains("__di ::") && !out.contains(":: tegu_core"), "{out}");
    }
}
