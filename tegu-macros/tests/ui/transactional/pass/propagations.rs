//! Every propagation, a named source, `crate = path`, and `#[transactional]` beside `#[intercept]` in written order.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};
use tegu_tx::{transactional, TxError};

mod reexport {
    pub use tegu_tx;
}

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
pub struct Orders;

impl Orders {
    #[transactional]
    pub async fn required(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(requires_new, source = "orders")]
    pub async fn requires_new(&self) -> Result<u32, TxError> {
        Ok(1)
    }

    #[transactional(nested)]
    pub async fn nested(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(mandatory, crate = reexport::tegu_tx)]
    pub async fn mandatory(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[intercept(Timing)]
    #[transactional(never)]
    pub async fn never(&self, id: u64) -> Result<u64, TxError> {
        Ok(id)
    }
}

fn main() {}
