//! Every option of the transaction a method begins, alone and together, with a retry beside `#[intercept]` on either side, and arguments of every kind a retry copies.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};
use tegu_tx::{transactional, TxError};

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[derive(Debug)]
pub enum PayError {
    Tx(TxError),
    Declined,
}

impl From<TxError> for PayError {
    fn from(e: TxError) -> Self {
        PayError::Tx(e)
    }
}

mod rules {
    pub fn declined(e: &super::PayError) -> bool {
        matches!(e, super::PayError::Declined)
    }
}

#[singleton_proto]
pub struct Payments;

impl Payments {
    #[transactional(read_only)]
    pub async fn read_only(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(nested, isolation = "repeatable_read", timeout_ms = 250)]
    pub async fn isolated(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(requires_new, isolation = "serializable", retry = 3, backoff_ms = 20, commit_on = rules::declined)]
    pub async fn pay(&self, amount: u64, memo: &str, tags: Vec<String>, (a, b): (u8, u8)) -> Result<u64, PayError> {
        let _ = (memo, tags, a, b);
        Ok(amount)
    }

    #[intercept(Timing)]
    #[transactional(requires_new, retry = 1)]
    pub async fn inside(&self, mut n: u32) -> Result<u32, TxError> {
        n += 1;
        Ok(n)
    }

    #[transactional(requires_new, retry = 1)]
    #[intercept(Timing)]
    pub async fn outside(&self, text: String) -> Result<usize, TxError> {
        Ok(text.len())
    }

    #[transactional(isolation = "read_committed", commit_on = rules::declined)]
    pub async fn ruled(&self) -> Result<(), PayError> {
        Err(PayError::Declined)
    }
}

fn main() {}
