//! A retried method runs again for each try: it borrows `self` (`&self`), which each try can use.
use std::sync::Arc;

use tegu_core::singleton_proto;
use tegu_tx::{transactional, TxError};

#[singleton_proto]
pub struct Orders;

impl Orders {
    #[transactional(requires_new, retry = 3)]
    pub async fn place(self: Arc<Self>) -> Result<(), TxError> {
        Ok(())
    }
}

fn main() {}
