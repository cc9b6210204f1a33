//! `#[transactional]`'s options: one propagation, one non-empty `source`, nothing else; every mistake is reported in one compile.
use tegu_core::singleton_proto;
use tegu_tx::{transactional, TxError};

#[singleton_proto]
pub struct Orders;

impl Orders {
    #[transactional(requierd)]
    pub async fn misspelt(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(nested, requires_new)]
    pub async fn two_propagations(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(source = "a", source = "b")]
    pub async fn two_sources(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(source = "")]
    pub async fn empty_source(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(database = "orders")]
    pub async fn unknown_key(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(source = orders)]
    pub async fn source_not_a_string(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(= "orders")]
    pub async fn no_key(&self) -> Result<(), TxError> {
        Ok(())
    }
}

fn main() {}
