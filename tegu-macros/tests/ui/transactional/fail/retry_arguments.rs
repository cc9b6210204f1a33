//! A retried method runs again with a copy of its arguments: they are `Clone`.
use tegu_core::singleton_proto;
use tegu_tx::{transactional, TxError};

#[singleton_proto]
pub struct Orders;

/// Not `Clone`.
pub struct Basket(Vec<u32>);

impl Orders {
    #[transactional(requires_new, retry = 3)]
    pub async fn place(&self, basket: Basket) -> Result<usize, TxError> {
        Ok(basket.0.len())
    }
}

fn main() {}
