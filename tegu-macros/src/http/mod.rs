//! `#[http_routes]`, in the stages of the proto macros: the attribute's options and the route
//! attributes (`attr`), the model of the impl block (`ast`), the rules that need the whole
//! block (`check`), then the expansion (`expand`). Errors accumulate in one `Ctxt`, so one
//! compile reports them all. The struct half, `#[http_controller]`, is a proto (the crate's
//! `ast` and `expand`) with a path prefix and middleware.

mod ast;
mod attr;
mod check;
mod expand;

use proc_macro2::TokenStream;

use crate::ctxt::Ctxt;
use crate::internals::finish;

pub(crate) fn routes(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let options = attr::RoutesAttr::parse(&cx, args);
    let model = ast::RoutesItem::from_tokens(&cx, options, item.clone());
    if let Some(model) = &model {
        check::check(&cx, model);
    }
    finish(cx, model.as_ref().map(|m| (&m.item, m)), item, expand::expand)
}
