//! A `#[transactional]` method returns a `Result` whose error converts from `TxError`: the advice handles no other output.
use tegu_core::singleton_proto;
use tegu_tx::transactional;

#[singleton_proto]
pub struct Orders;

impl Orders {
    #[transactional]
    pub async fn count(&self) -> u64 {
        2
    }
}

fn main() {}
