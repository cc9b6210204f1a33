//! The expansion of `#[http_routes]`: one axum handler per route, each calling the controller
//! method with its extractors, and an inventory entry that tegu-http's router collects.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::ast::RoutesItem;
use crate::internals::private_path;

pub(super) fn expand(model: &RoutesItem) -> TokenStream {
    let dih = private_path(model.attr.krate.as_ref(), quote!(::tegu_http));
    let item = &model.item;
    let self_ty = &model.item.self_ty;
    let routes = model.handlers.iter().flat_map(|h| h.routes.iter().map(move |r| (h, r))).map(|(handler, route)| {
        let ident = &handler.ident;
        let names: Vec<_> = (0..handler.args.len()).map(|i| format_ident!("__di_a{}", i)).collect();
        let types = &handler.args;
        let last = handler.args.len().saturating_sub(1);
        let checks = handler.args.iter().enumerate().map(|(i, ty)| {
            if i == last {
                quote_spanned!(ty.span()=> __dih::assert_last_extractor::<#ty, _>();)
            } else {
                quote_spanned!(ty.span()=> __dih::assert_parts_extractor::<#ty>();)
            }
        });
        // Spanned at the return type, so a type that is no response is reported there.
        let span = handler.output.as_ref().map_or_else(|| ident.span(), Spanned::span);
        let respond = quote_spanned!(span=> __dih::IntoResponse::into_response);
        // Converted inside the block: a `-> impl IntoResponse` of a `&self` method captures the
        // borrow of the controller (edition 2024), which must not outlive the block.
        let call = if handler.is_async {
            quote!(__di_c.#ident(#(#names),*).await)
        } else {
            quote!(__di_c.#ident(#(#names),*))
        };
        let filter = syn::Ident::new(&route.http_method, route.attr_span);
        let http_method = &route.http_method;
        let path = &route.path;
        let fn_name = ident.to_string();
        let layers = handler.middleware.iter().rev();
        quote! {
            {
                #(#checks)*
                // A fn item, not a closure: a compile error about it names the method, not a
                // closure at a file path. The response is built inside, where the controller
                // is still borrowed (an `impl IntoResponse` of a `&self` method captures it).
                async fn #ident(
                    __dih::State(__di_c): __dih::State<__dih::Arc<#self_ty>>,
                    #(#names: #types),*
                ) -> __dih::Response {
                    let __di_out = #call;
                    // An `Err` fails the request's scope, whatever status it answers.
                    #[allow(unused_imports)]
                    use __dih::{ErrFails as _, NotAResult as _};
                    (&&__dih::Outcome(&__di_out)).__di_fail_on_err();
                    #respond(__di_out)
                }
                let __di_m = __dih::on(__dih::MethodFilter::#filter, #ident).with_state(__dih::Arc::clone(__di_this));
                __di_routes.add(#http_method, #path, #fn_name, __di_m #(.layer(#layers))*);
            }
        }
    });
    quote! {
        #item

        const _: () = {
            use #dih as __dih;

            fn __di_routes(__di_routes: &mut __dih::Routes) -> __dih::Result<(), __dih::DiError> {
                let __di_this = &__di_routes.controller::<#self_ty>()?;
                #(#routes)*
                __dih::Result::Ok(())
            }

            __dih::inventory::submit! { __dih::ControllerRoutes::new::<#self_ty>(__di_routes) }
        };
    }
}
