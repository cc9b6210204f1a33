//! `#[handlers]` on an impl block of a singleton: registers its `#[event_handler]` and
//! `#[schedule(..)]` methods through `inventory` (`tegu_core::events::EventBus`, `App::run_schedule`).
//! Alone, `#[event_handler]` and `#[schedule]` are errors that say where they belong.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parse;
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;
use crate::internals::{crate_option, finish, private_path};

const EVENT_HANDLER: &str = "event_handler";
const SCHEDULE: &str = "schedule";

enum When {
    /// Milliseconds.
    Every(u64),
    Cron(String),
}

/// `#[event_handler(..)]`'s phase, as `tegu_core`'s `EventPhase` variant.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    BeforeCommit,
    AfterCommit,
    AfterRollback,
}

enum Kind {
    /// Takes `&E`; emits the events listed; `once_per_cluster`, maybe.
    Event(Box<syn::Type>, Phase, Vec<syn::Type>, bool),
    Schedule(Schedule),
}

/// What a method's attribute says, parsed: the part of its [`Kind`] that the signature does not.
enum Options {
    Event(Phase, Vec<syn::Type>, bool),
    Schedule(Schedule),
}

/// `#[schedule(..)]`'s options.
struct Schedule {
    when: When,
    once_per_cluster: bool,
    /// `config = "key"`: the configuration key whose value, when set, replaces `when`.
    config: Option<String>,
    /// `emits(E, ..)`: the events the job emits, in its own scope.
    emits: Vec<syn::Type>,
}

struct Method {
    ident: syn::Ident,
    kind: Kind,
}

struct HandlersItem {
    item: syn::ItemImpl,
    /// `crate = path`: where generated code finds tegu-core.
    krate: Option<syn::Path>,
    methods: Vec<Method>,
}

pub(crate) fn handlers(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let krate = crate_option(&cx, args, "handlers");
    let model = parse(&cx, item.clone(), krate);
    finish(cx, model.as_ref().map(|m| (&m.item, m)), item, expand)
}

/// `#[event_handler]` or `#[schedule]` outside a `#[handlers]` impl block.
pub(crate) fn stray(name: &str, item: TokenStream) -> TokenStream {
    let error = syn::Error::new(
        Span::call_site(),
        format!("`#[{name}]` needs `#[tegu_core::handlers]` on its impl block, which registers the method"),
    )
    .to_compile_error();
    quote!(#item #error)
}

fn parse(cx: &Ctxt, item: TokenStream, krate: Option<syn::Path>) -> Option<HandlersItem> {
    let mut item = crate::internals::inherent_impl(cx, item, "#[handlers]", "singleton proto")?;
    let self_ty = (*item.self_ty).clone();
    let mut methods = Vec::new();
    let mut marked = false;
    for impl_item in &mut item.items {
        let syn::ImplItem::Fn(method) = impl_item else { continue };
        let mut kinds = Vec::new();
        method.attrs.retain(|attr| {
            let name = attr.path().segments.last().map(|s| s.ident.to_string());
            match name.as_deref() {
                Some(EVENT_HANDLER) => {
                    kinds.push((attr.span(), false, event_phase(cx, attr).map(|(p, e, c)| Options::Event(p, e, c))));
                    false
                }
                Some(SCHEDULE) => {
                    kinds.push((attr.span(), true, schedule_when(cx, attr)));
                    false
                }
                _ => true,
            }
        });
        if kinds.len() > 1 {
            cx.error_spanned_by(&method.sig.ident, "one `#[event_handler]` or `#[schedule]` per method");
            continue;
        }
        let Some((span, is_schedule, options)) = kinds.pop() else { continue };
        marked = true;
        if let Some(kind) = check_signature(cx, &method.sig, &self_ty, span, options, is_schedule) {
            methods.push(Method { ident: method.sig.ident.clone(), kind });
        }
    }
    // A trait impl is reported as such above; "no handlers" would only repeat it.
    if !marked && item.trait_.is_none() {
        cx.error_spanned_by(
            &item.self_ty,
            "no handlers: mark methods with `#[event_handler]` or `#[schedule(every = \"30s\")]`",
        );
    }
    Some(HandlersItem { item, krate, methods })
}

/// What an attribute's options gave: `found`, or the parse error, or (none given) `usage`.
fn parsed_or_usage<T>(
    cx: &Ctxt,
    attr: &syn::Attribute,
    parsed: syn::Result<()>,
    found: Option<T>,
    usage: &str,
) -> Option<T> {
    match (parsed, found) {
        (Err(err), _) => {
            cx.push(err);
            None
        }
        (Ok(()), None) => {
            cx.error_spanned_by(attr, usage);
            None
        }
        (Ok(()), found) => found,
    }
}

/// `emits(E, ..)`: the event types a handler or job emits, once.
fn parse_emits(meta: &syn::meta::ParseNestedMeta<'_>, emits: &mut Option<Vec<syn::Type>>) -> syn::Result<()> {
    if emits.is_some() {
        return Err(meta.error("`emits` is given twice"));
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let types = content.parse_terminated(syn::Type::parse, syn::Token![,])?;
    if types.is_empty() {
        return Err(meta.error("`emits` lists the event types emitted: `emits(TodoCompleted)`"));
    }
    *emits = Some(types.into_iter().collect());
    Ok(())
}

/// Nothing (after the commit), `before_commit`, `after_commit` or `after_rollback`; and
/// `emits(E, ..)` and `once_per_cluster`, maybe.
fn event_phase(cx: &Ctxt, attr: &syn::Attribute) -> Option<(Phase, Vec<syn::Type>, bool)> {
    let usage = "`#[event_handler]` takes one of `before_commit`, `after_commit` (the default) or \
                 `after_rollback`, `once_per_cluster` if one instance of the service is to handle \
                 each event, and `emits(Event, ..)` if it emits events; the event is the \
                 parameter's type";
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return Some((Phase::AfterCommit, Vec::new(), false));
    }
    let mut phase = None;
    let mut emits = None;
    let mut once_per_cluster = None;
    let parsed = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("emits") {
            return parse_emits(&meta, &mut emits);
        }
        if meta.path.is_ident("once_per_cluster") {
            if once_per_cluster.is_some() {
                return Err(meta.error("`once_per_cluster` is given twice"));
            }
            if !(meta.input.is_empty() || meta.input.peek(syn::Token![,])) {
                return Err(meta.error("`once_per_cluster` takes no value"));
            }
            once_per_cluster = Some(meta.path.span());
            return Ok(());
        }
        let this = [
            ("before_commit", Phase::BeforeCommit),
            ("after_commit", Phase::AfterCommit),
            ("after_rollback", Phase::AfterRollback),
        ]
        .into_iter()
        .find(|(name, _)| meta.path.is_ident(name));
        match this {
            Some(_) if phase.is_some() => Err(meta.error("one phase per handler")),
            Some((_, this)) if meta.input.is_empty() || meta.input.peek(syn::Token![,]) => {
                phase = Some(this);
                Ok(())
            }
            _ => Err(meta.error(format!("unknown option; {usage}"))),
        }
    });
    let phase = match (&parsed, phase, emits.is_some() || once_per_cluster.is_some()) {
        (Ok(()), None, true) => Some(Phase::AfterCommit),
        (_, phase, _) => phase,
    };
    let (phase, emits) = parsed_or_usage(cx, attr, parsed, phase, usage).map(|p| (p, emits.unwrap_or_default()))?;
    if let Some(span) = once_per_cluster
        && phase != Phase::AfterCommit
    {
        cx.push(syn::Error::new(
            span,
            "`once_per_cluster` is for a handler after the commit: a `before_commit` or `after_rollback` \
             handler runs in the instance that emitted the event, once already",
        ));
        return None;
    }
    Some((phase, emits, once_per_cluster.is_some()))
}

/// `every = "30s"` or `cron = "0 */5 * * * *"`, checked now; then `once_per_cluster` and
/// `config = "key"`, maybe.
fn schedule_when(cx: &Ctxt, attr: &syn::Attribute) -> Option<Options> {
    let usage = "write `#[schedule(every = \"30s\")]` or `#[schedule(cron = \"0 */5 * * * *\")]`, \
                 with `once_per_cluster` if one instance of the service is to run each due time, \
                 `config = \"key\"` if a configuration key may set it, and `emits(Event, ..)` if it \
                 emits events";
    let mut when = None;
    let mut once_per_cluster = false;
    let mut config = None;
    let mut emits = None;
    let parsed = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("emits") {
            return parse_emits(&meta, &mut emits);
        }
        if meta.path.is_ident("config") {
            let key: syn::LitStr = meta.value()?.parse()?;
            if config.is_some() {
                return Err(meta.error("`config` is given twice"));
            }
            let text = key.value();
            if text.is_empty() || text.split('.').any(str::is_empty) {
                return Err(syn::Error::new(
                    key.span(),
                    "a configuration key: dot-separated names, e.g. \"purge.every\"",
                ));
            }
            config = Some(text);
            return Ok(());
        }
        if meta.path.is_ident("once_per_cluster") {
            if once_per_cluster {
                return Err(meta.error("`once_per_cluster` is given twice"));
            }
            if !(meta.input.is_empty() || meta.input.peek(syn::Token![,])) {
                return Err(meta.error("`once_per_cluster` takes no value"));
            }
            once_per_cluster = true;
            return Ok(());
        }
        let key = if meta.path.is_ident("every") {
            "every"
        } else if meta.path.is_ident("cron") {
            "cron"
        } else {
            return Err(meta.error(format!("unknown option; {usage}")));
        };
        let value: syn::LitStr = meta.value()?.parse()?;
        if when.is_some() {
            return Err(meta.error("one of `every` or `cron`, once"));
        }
        when = Some(match key {
            "every" => match parse_duration(&value.value()) {
                Ok(ms) => When::Every(ms),
                Err(reason) => return Err(syn::Error::new(value.span(), reason)),
            },
            _ => match check_cron(&value.value()) {
                Ok(()) => When::Cron(value.value()),
                Err(reason) => return Err(syn::Error::new(value.span(), reason)),
            },
        });
        Ok(())
    });
    let when = parsed_or_usage(cx, attr, parsed, when, usage)?;
    Some(Options::Schedule(Schedule { when, once_per_cluster, config, emits: emits.unwrap_or_default() }))
}

/// A cron expression as `cron::Schedule` (which tegu-core parses at run time) takes it.
fn check_cron(expr: &str) -> Result<(), String> {
    let fields = expr.split_whitespace().count();
    let usage = "six or seven fields, seconds first: `sec min hour day-of-month month day-of-week [year]`, \
                 e.g. \"0 */5 * * * *\" (every five minutes)";
    if !(6..=7).contains(&fields) {
        return Err(format!("bad cron expression \"{expr}\": it has {fields} fields; write {usage}"));
    }
    // Without the `schedule` feature, tegu-core has no jobs to run it with: the generated code
    // fails to compile on its missing `ScheduleDescriptor` instead.
    #[cfg(feature = "schedule")]
    if let Err(error) = expr.parse::<cron::Schedule>() {
        // The parser's message repeats the expression with a caret; its last line says why.
        let error = error.to_string();
        let why = error.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with('^')).unwrap_or("");
        return Err(format!("bad cron expression \"{expr}\": {why}; write {usage}"));
    }
    Ok(())
}

/// `"30s"`, `"1h30m"`, `"250ms"`, `"1d"`: milliseconds, more than zero.
fn parse_duration(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "bad duration \"{text}\": write numbers with units (`ms`, `s`, `m`, `h`, `d`), e.g. \"30s\" or \"1h30m\""
        )
    };
    let mut total: u64 = 0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let factor = match rest[..unit_len].trim() {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        total = number.checked_mul(factor).and_then(|n| total.checked_add(n)).ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    if total == 0 {
        return Err(format!("a schedule of \"{text}\" would never wait; give a period longer than zero"));
    }
    Ok(total)
}

/// `async fn m(&self, event: &E)` for an event handler, `async fn m(&self)` for a job.
fn check_signature(
    cx: &Ctxt,
    sig: &syn::Signature,
    self_ty: &syn::Type,
    span: Span,
    options: Option<Options>,
    is_schedule: bool,
) -> Option<Kind> {
    let (what, usage) = if is_schedule {
        ("a scheduled job", format!("`async fn {}(&self)`", sig.ident))
    } else {
        ("an event handler", format!("`async fn {}(&self, event: &MyEvent)`", sig.ident))
    };
    let wrong = |cx: &Ctxt, at: &dyn quote::ToTokens| {
        cx.error_spanned_by(at, format!("{what} is {usage}, returning `()` or `Result<(), E>`"));
    };
    let mut ok = true;
    if sig.asyncness.is_none() || !sig.generics.params.is_empty() {
        wrong(cx, &sig.fn_token);
        ok = false;
    }
    match sig.inputs.first() {
        Some(syn::FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        _ => {
            wrong(cx, &sig.ident);
            ok = false;
        }
    }
    let rest: Vec<&syn::FnArg> = sig.inputs.iter().skip(1).collect();
    let kind = if is_schedule {
        if let Some(extra) = rest.first() {
            wrong(cx, extra);
            ok = false;
        }
        match options {
            Some(Options::Schedule(schedule)) => Some(Kind::Schedule(schedule)),
            _ => None,
        }
    } else {
        let (phase, emits, cluster) = match options {
            Some(Options::Event(phase, emits, cluster)) => (Some(phase), emits, cluster),
            _ => (None, Vec::new(), false),
        };
        match rest.as_slice() {
            [syn::FnArg::Typed(arg)] => match &*arg.ty {
                syn::Type::Reference(r) if r.mutability.is_none() => phase.map(|phase| {
                    Kind::Event(Box::new(crate::internals::replace_self(&r.elem, self_ty)), phase, emits, cluster)
                }),
                other => {
                    wrong(cx, other);
                    None
                }
            },
            [] => {
                cx.push(syn::Error::new(span, format!("{what} takes the event: {usage}")));
                None
            }
            [_, extra, ..] | [extra] => {
                wrong(cx, extra);
                None
            }
        }
    };
    if ok { kind } else { None }
}

/// `emits(..)`'s types as the descriptor's `&[Emitted]`, and a check that each is an event.
fn emitted(emits: &[syn::Type]) -> (TokenStream, TokenStream) {
    let list = emits
        .iter()
        .map(|ty| quote!(__di::Emitted { ty: ::core::any::TypeId::of::<#ty>, name: ::core::any::type_name::<#ty> }));
    let checks = emits.iter().map(|ty| quote_spanned!(ty.span()=> __di::assert_event::<#ty>();));
    (quote!(&[#(#list),*]), quote!(#(#checks)*))
}

fn expand(model: &HandlersItem) -> TokenStream {
    let item = &model.item;
    let self_ty = &model.item.self_ty;
    let registrations = model.methods.iter().map(|method| {
        let ident = &method.ident;
        let name = ident.to_string();
        let call = format_ident!("__di_call_{}", ident);
        match &method.kind {
            Kind::Event(event, phase, emits, cluster) => {
                let (emits, emits_checks) = emitted(emits);
                let phase = match phase {
                    Phase::BeforeCommit => quote!(BeforeCommit),
                    Phase::AfterCommit => quote!(AfterCommit),
                    Phase::AfterRollback => quote!(AfterRollback),
                };
                let once = if *cluster { quote!(PerCluster) } else { quote!(PerInstance) };
                let check = quote_spanned!(event.span()=> __di::assert_event::<#event>(););
                quote! {
                    const _: () = { #check #emits_checks };
                    fn #call(__di_this: __di::AnyArc, __di_event: __di::AnyEvent) -> __di::UnitFuture {
                        __di::Box::pin(async move {
                            let __di_this = __di::downcast::<#self_ty>(__di_this);
                            let __di_event = __di::event_ref::<#event>(&__di_event);
                            __di::hook_result(<#self_ty>::#ident(&__di_this, __di_event).await)
                        })
                    }
                    __di::inventory::submit! {
                        __di::HandlerDescriptor {
                            proto: ::core::any::TypeId::of::<#self_ty>,
                            proto_name: ::core::any::type_name::<#self_ty>,
                            event: ::core::any::TypeId::of::<#event>,
                            event_name: ::core::any::type_name::<#event>,
                            method: #name,
                            phase: __di::EventPhase::#phase,
                            once: __di::Once::#once,
                            emits: #emits,
                            call: #call,
                        }
                    }
                }
            }
            Kind::Schedule(Schedule { when, once_per_cluster, config, emits }) => {
                let (emits, emits_checks) = emitted(emits);
                let config = match config {
                    Some(key) => quote!(::core::option::Option::Some(#key)),
                    None => quote!(::core::option::Option::None),
                };
                let when = match when {
                    When::Every(ms) => quote!(__di::When::Every(#ms)),
                    When::Cron(expr) => quote!(__di::When::Cron(#expr)),
                };
                quote! {
                    const _: () = { #emits_checks };
                    fn #call(__di_this: __di::AnyArc) -> __di::UnitFuture {
                        __di::Box::pin(async move {
                            let __di_this = __di::downcast::<#self_ty>(__di_this);
                            __di::hook_result(<#self_ty>::#ident(&__di_this).await)
                        })
                    }
                    __di::inventory::submit! {
                        __di::ScheduleDescriptor {
                            proto: ::core::any::TypeId::of::<#self_ty>,
                            proto_name: ::core::any::type_name::<#self_ty>,
                            method: #name,
                            when: #when,
                            once_per_cluster: #once_per_cluster,
                            config: #config,
                            emits: #emits,
                            call: #call,
                        }
                    }
                }
            }
        }
    });
    let singleton = quote_spanned!(self_ty.span()=> __di::assert_singleton::<#self_ty>(););
    let di = private_path(model.krate.as_ref(), quote!(::tegu_core));
    quote! {
        #item

        const _: () = {
            use #di as __di;
            const _: () = { #singleton };
            #(#registrations)*
        };
    }
}
