//! Options of `#[singleton_proto(...)]`, `#[context_proto(...)]` and `#[inject(...)]`.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Token, Type};

use crate::ctxt::Ctxt;
use crate::internals::{check_prefix, once, path_name, skip_value};
use crate::symbol::{
    ACCESS, COMPLETE, CRATE, DESTROY, EXTERNAL, INIT, INSTANCES, INSTANCES_OF, LAZY, NAME, ORDER, PATH, PREFIX,
    PRIVATE, PROFILE, PROVIDES, PUBLIC, RELOADABLE, SKIP,
};

/// Which proto attribute is being expanded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtoScope {
    Singleton,
    Context,
    /// `#[http_controller]`: a singleton whose routes `#[http_routes]` registers with tegu-http.
    Controller,
    /// `#[config_proto]`: a singleton read from the configuration.
    Config,
    /// `#[transient_proto]`: built anew for every injection.
    Transient,
}

impl ProtoScope {
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            ProtoScope::Singleton => "#[singleton_proto]",
            ProtoScope::Context => "#[context_proto]",
            ProtoScope::Controller => "#[http_controller]",
            ProtoScope::Config => "#[config_proto]",
            ProtoScope::Transient => "#[transient_proto]",
        }
    }

    /// Whether the proto is built once per App.
    pub(crate) fn is_singleton(self) -> bool {
        matches!(self, ProtoScope::Singleton | ProtoScope::Controller | ProtoScope::Config)
    }

    /// Whether this attribute takes option `name` ([`OPTIONS`]).
    fn accepts(self, name: &str) -> bool {
        OPTIONS.iter().any(|(option, scopes)| *option == name && scopes.contains(&self))
    }

    /// The options this attribute takes, as an "unknown option" error lists them.
    fn expected(self) -> String {
        let names: Vec<String> =
            OPTIONS.iter().filter(|(_, scopes)| scopes.contains(&self)).map(|(name, _)| format!("`{name}`")).collect();
        let (last, rest) = names.split_last().expect("every attribute takes options");
        let note = match self {
            ProtoScope::Transient => " (a transient has no hooks: the container does not keep it)",
            _ => "",
        };
        format!("{} or {last}{note}", rest.join(", "))
    }
}

/// Which attribute takes which option: the one table the parser checks and the "unknown option"
/// error lists, in the order it lists them.
const OPTIONS: &[(&str, &[ProtoScope])] = {
    use ProtoScope::{Config, Context, Controller, Singleton, Transient};
    const ALL: &[ProtoScope] = &[Singleton, Context, Controller, Config, Transient];
    const HOOKED: &[ProtoScope] = &[Singleton, Context, Controller];
    &[
        (PATH, &[Controller]),
        (PREFIX, &[Config]),
        (INSTANCES, &[Config]),
        (RELOADABLE, &[Config]),
        (NAME, ALL),
        (PROVIDES, &[Singleton, Context, Controller, Transient]),
        (ACCESS, ALL),
        (INIT, HOOKED),
        (COMPLETE, &[Context]),
        (DESTROY, HOOKED),
        (LAZY, &[Singleton]),
        (ORDER, &[Singleton, Context, Controller, Transient]),
        (PROFILE, ALL),
        (INSTANCES_OF, &[Singleton, Context]),
        (CRATE, ALL),
    ]
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Public,
    Private,
}

/// The options of the proto attribute, each at most once.
#[derive(Default)]
pub(crate) struct ProtoAttr {
    pub(crate) name: Option<syn::LitStr>,
    pub(crate) provides: Vec<Type>,
    pub(crate) access: Option<Access>,
    pub(crate) init: Option<syn::Ident>,
    /// Context protos only (`check::complete_needs_a_context_proto`).
    pub(crate) complete: Option<syn::Ident>,
    pub(crate) destroy: Option<syn::Ident>,
    pub(crate) krate: Option<syn::Path>,
    /// `#[http_controller(path = "...")]`: the prefix of the controller's routes.
    pub(crate) path: Option<syn::LitStr>,
    /// Registered only under this profile.
    pub(crate) profile: Option<syn::LitStr>,
    /// One instance per instance of this type.
    pub(crate) instances_of: Option<Type>,
    /// `#[config_proto(prefix = "...")]`: the section's key.
    pub(crate) prefix: Option<syn::LitStr>,
    /// `#[config_proto(instances)]`: one instance per table under the prefix.
    pub(crate) instances: Option<syn::Path>,
    /// `#[singleton_proto(lazy)]`: built on first use.
    pub(crate) lazy: Option<syn::Path>,
    /// `#[config_proto(reloadable)]`: read again by `App::reload_config`, held as `ConfigRef<T>`.
    pub(crate) reloadable: Option<syn::Path>,
    /// `order = -1`: where the proto comes among its type's providers in a collection.
    pub(crate) order: Option<i32>,
}

impl ProtoAttr {
    pub(crate) fn parse(cx: &Ctxt, args: TokenStream, scope: ProtoScope) -> ProtoAttr {
        let mut attr = ProtoAttr::default();
        let takes = |name| scope.accepts(name);
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident(NAME) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                if lit.value().is_empty() {
                    cx.error_spanned_by(&lit, "an object name cannot be empty");
                }
                once(cx, &meta, &mut attr.name, lit);
            } else if meta.path.is_ident(PROFILE) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                if lit.value().is_empty() {
                    cx.error_spanned_by(&lit, "a profile name cannot be empty");
                }
                once(cx, &meta, &mut attr.profile, lit);
            } else if takes(PREFIX) && meta.path.is_ident(PREFIX) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                let prefix = lit.value();
                if prefix.is_empty() || prefix.split('.').any(str::is_empty) {
                    cx.error_spanned_by(&lit, "a config prefix is a key such as \"db\" or \"services.db\"");
                }
                once(cx, &meta, &mut attr.prefix, lit);
            } else if takes(INSTANCES) && meta.path.is_ident(INSTANCES) {
                once(cx, &meta, &mut attr.instances, meta.path.clone());
            } else if takes(RELOADABLE) && meta.path.is_ident(RELOADABLE) {
                once(cx, &meta, &mut attr.reloadable, meta.path.clone());
            } else if takes(LAZY) && meta.path.is_ident(LAZY) {
                once(cx, &meta, &mut attr.lazy, meta.path.clone());
            } else if takes(ORDER) && meta.path.is_ident(ORDER) {
                let expr: syn::Expr = meta.value()?.parse()?;
                match order_of(&expr) {
                    Some(order) => once(cx, &meta, &mut attr.order, order),
                    None => cx.error_spanned_by(
                        &expr,
                        "`order` is an integer of 32 bits, such as `order = 10` or `order = -1`: lower comes first in a `Vec<Arc<dyn Trait>>`",
                    ),
                }
            } else if takes(INSTANCES_OF) && meta.path.is_ident(INSTANCES_OF) {
                let ty: Type = meta.value()?.parse()?;
                once(cx, &meta, &mut attr.instances_of, ty);
            } else if takes(PROVIDES) && meta.path.is_ident(PROVIDES) {
                let content;
                syn::parenthesized!(content in meta.input);
                let types = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                if types.is_empty() {
                    cx.error_spanned_by(
                        &meta.path,
                        "`provides(...)` lists at least one type, such as `provides(dyn Greeter)`",
                    );
                }
                attr.provides.extend(types);
            } else if meta.path.is_ident(ACCESS) {
                let ident: syn::Ident = meta.value()?.parse()?;
                let access = if ident == PUBLIC {
                    Access::Public
                } else if ident == PRIVATE {
                    Access::Private
                } else {
                    cx.error_spanned_by(
                        &ident,
                        format!("unknown access level `{ident}`; expected `public` or `private`"),
                    );
                    return Ok(());
                };
                once(cx, &meta, &mut attr.access, access);
            } else if takes(INIT) && meta.path.is_ident(INIT) {
                let method: syn::Ident = meta.value()?.parse()?;
                once(cx, &meta, &mut attr.init, method);
            } else if (takes(COMPLETE) || takes(INIT)) && meta.path.is_ident(COMPLETE) {
                // Taken by every attribute with hooks, so that `check.rs` can say that
                // `complete` is a context proto's hook, rather than "unknown option".
                let method: syn::Ident = meta.value()?.parse()?;
                once(cx, &meta, &mut attr.complete, method);
            } else if takes(DESTROY) && meta.path.is_ident(DESTROY) {
                let method: syn::Ident = meta.value()?.parse()?;
                once(cx, &meta, &mut attr.destroy, method);
            } else if meta.path.is_ident(CRATE) {
                let path: syn::Path = meta.value()?.call(syn::Path::parse_mod_style)?;
                once(cx, &meta, &mut attr.krate, path);
            } else if takes(PATH) && meta.path.is_ident(PATH) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                if let Err(reason) = check_prefix(&lit.value()) {
                    cx.error_spanned_by(&lit, reason);
                }
                once(cx, &meta, &mut attr.path, lit);
            } else {
                let expected = scope.expected();
                cx.error_spanned_by(
                    &meta.path,
                    format!("unknown option `{}`; expected {expected}", path_name(&meta.path)),
                );
                skip_value(&meta)?;
            }
            Ok(())
        });
        if let Err(err) = parser.parse2(args) {
            cx.push(err);
        }
        if let (Some(reloadable), Some(_)) = (&attr.reloadable, &attr.instances) {
            cx.error_spanned_by(
                reloadable,
                "a multi-instance section (`instances`) cannot be `reloadable`: declare each instance a section of its own",
            );
        }
        attr
    }
}

/// The value of `order = ..`: an integer literal, maybe negated, that fits an `i32`.
fn order_of(expr: &syn::Expr) -> Option<i32> {
    match expr {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(int), .. }) if int.suffix().is_empty() => {
            int.base10_parse::<i32>().ok()
        }
        syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => match &**expr {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(int), .. }) if int.suffix().is_empty() => {
                int.base10_parse::<i64>().ok().and_then(|n| i32::try_from(-n).ok())
            }
            _ => None,
        },
        _ => None,
    }
}

/// The options of one `#[inject]`.
#[derive(Default)]
pub(crate) struct InjectAttr {
    pub(crate) name: Option<syn::LitStr>,
    /// `#[inject(external)]`: provided by a proto registered by hand; checked at build.
    pub(crate) external: bool,
    /// `#[inject(skip)]`: not injected, built with `Default::default()` (serde's `skip`).
    pub(crate) skip: bool,
}

impl InjectAttr {
    pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute) -> InjectAttr {
        let mut name = None;
        let mut external = None;
        let mut skip = None;
        if let syn::Meta::List(_) = attr.meta {
            let result = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident(NAME) {
                    let lit: syn::LitStr = meta.value()?.parse()?;
                    once(cx, &meta, &mut name, lit);
                } else if meta.path.is_ident(EXTERNAL) {
                    if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                        cx.error_spanned_by(&meta.path, "`external` takes no value: write `#[inject(external)]`");
                        skip_value(&meta)?;
                    }
                    once(cx, &meta, &mut external, ());
                } else if meta.path.is_ident(SKIP) {
                    if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                        cx.error_spanned_by(&meta.path, "`skip` takes no value: write `#[inject(skip)]`");
                        skip_value(&meta)?;
                    }
                    once(cx, &meta, &mut skip, ());
                } else {
                    cx.error_spanned_by(
                        &meta.path,
                        format!(
                            "unknown `#[inject]` option `{}`; expected `name = \"...\"`, `external` or `skip`",
                            path_name(&meta.path)
                        ),
                    );
                    skip_value(&meta)?;
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.push(err);
            }
        } else if let syn::Meta::NameValue(nv) = &attr.meta {
            cx.error_spanned_by(nv, "write `#[inject(name = \"...\")]`");
        }
        if skip.is_some() && (name.is_some() || external.is_some()) {
            cx.error_spanned_by(
                attr,
                "`#[inject(skip)]` builds the field with `Default::default()`: it takes no other option",
            );
        }
        InjectAttr { name, external: external.is_some(), skip: skip.is_some() }
    }
}

#[cfg(test)]
mod tests {
    use super::ProtoScope;

    /// The table gives each attribute's list, in the order its "unknown option" error shows it.
    #[test]
    fn each_attribute_lists_the_options_it_takes() {
        let lists = [
            (
                ProtoScope::Singleton,
                "`name`, `provides`, `access`, `init`, `destroy`, `lazy`, `order`, `profile`, `instances_of` or `crate`",
            ),
            (
                ProtoScope::Context,
                "`name`, `provides`, `access`, `init`, `complete`, `destroy`, `order`, `profile`, `instances_of` or `crate`",
            ),
            (
                ProtoScope::Controller,
                "`path`, `name`, `provides`, `access`, `init`, `destroy`, `order`, `profile` or `crate`",
            ),
            (ProtoScope::Config, "`prefix`, `instances`, `reloadable`, `name`, `access`, `profile` or `crate`"),
            (
                ProtoScope::Transient,
                "`name`, `provides`, `access`, `order`, `profile` or `crate` (a transient has no hooks: the container does not keep it)",
            ),
        ];
        for (scope, list) in lists {
            assert_eq!(scope.expected(), list, "{}", scope.attribute());
            assert!(scope.accepts("name") && scope.accepts("crate") && !scope.accepts("unknown"));
        }
        assert!(ProtoScope::Singleton.accepts("lazy") && !ProtoScope::Context.accepts("lazy"));
    }
}
