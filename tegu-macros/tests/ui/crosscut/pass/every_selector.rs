//! Every selector and option of `crosscut!`, through a re-export of tegu-core.

pub mod reexport {
    pub use tegu_core::*;
}

use reexport::advice::{Advice, AdviceParams, Call, Next};
use reexport::{crosscut, intercept, singleton_proto, App};

#[singleton_proto]
pub struct Tag;

pub struct TagParams {
    pub label: &'static str,
}

impl AdviceParams for Tag {
    type Params = TagParams;
    const DEFAULT: &'static TagParams = &TagParams { label: "" };
}

impl<R> Advice<R> for Tag {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let _ = call.params_of::<Tag>().label;
        next.run().await
    }
}

pub trait Audited: Send + Sync {}

crosscut!(Tag(label = "all"), implements = dyn Audited, module = "crate::shop", types = "*Shop", methods = "get_*|list", order = -1, crate = reexport);
crosscut!(Tag, methods = "*",);

pub mod shop {
    use super::*;

    #[singleton_proto(provides(dyn Audited))]
    pub struct BookShop;
    impl Audited for BookShop {}

    #[intercept]
    impl BookShop {
        pub async fn get_book(&self, id: u32) -> u32 {
            id
        }
        pub async fn list(&self) -> Vec<u32> {
            vec![1]
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let app = App::builder().build().await.unwrap();
        let shop = app.get_object::<shop::BookShop>().unwrap();
        assert_eq!(app.run_in_context(shop.get_book(3)).await, 3);
        assert_eq!(app.run_in_context(shop.list()).await, [1]);
    });
}
