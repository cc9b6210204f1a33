//! The options of the transaction a method begins: a retry only on a `requires_new` method, `backoff_ms` only with a retry, none of them on a method that never begins one, and each value of its kind.
use tegu_core::singleton_proto;
use tegu_tx::{transactional, TxError};

#[singleton_proto]
pub struct Orders;

fn is_declined(_: &TxError) -> bool {
    false
}

impl Orders {
    #[transactional(retry = 3)]
    pub async fn retried_without_owning(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(nested, retry = 3)]
    pub async fn retried_savepoint(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(requires_new, backoff_ms = 5)]
    pub async fn backoff_alone(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(never, read_only, timeout_ms = 100)]
    pub async fn never_begins(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(mandatory, isolation = "serializable")]
    pub async fn mandatory_begins_none(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(isolation = "snapshot")]
    pub async fn unknown_isolation(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(isolation = serializable)]
    pub async fn isolation_not_a_string(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(requires_new, retry = 0)]
    pub async fn no_retry(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(timeout_ms = "5s")]
    pub async fn timeout_as_text(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(read_only, read_only)]
    pub async fn read_only_twice(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(commit_on = "is_declined")]
    pub async fn rule_as_text(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(mandatory, commit_on = is_declined)]
    pub async fn rule_that_decides_nothing(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(commit_on = is_declined, commit_on = is_declined)]
    pub async fn two_rules(&self) -> Result<(), TxError> {
        Ok(())
    }
}

fn main() {}
