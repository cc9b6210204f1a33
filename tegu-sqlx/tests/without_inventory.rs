//! An App built `without_inventory()` that links a service with `#[transactional]` methods and
//! its database: one `build()` names every link that is missing, tegu-tx's included, and those
//! links build it. A binary of its own: the registry holds this service and what the linked
//! crates register.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;

use tegu_core::{App, DiError, singleton_proto};
use tegu_sqlx::{Database, Sqlite};
use tegu_tx::{Transactional, Transactions, TxError, TxScope, transactional};

#[singleton_proto]
pub struct Notes {
    #[inject]
    db: Arc<Database<Sqlite>>,
}

impl Notes {
    #[transactional]
    pub async fn count(&self) -> Result<i64, TxError> {
        let mut conn = self.db.conn().await?;
        sqlx::query_scalar("SELECT 1").fetch_one(&mut *conn).await.map_err(|e| self.db.error("counting", e))
    }
}

#[tokio::test]
async fn one_build_names_every_link_missing_and_those_links_build() {
    let builder = || {
        App::builder()
            .without_inventory()
            .link::<Notes>()
            .link::<Database<Sqlite>>()
            .config_value("database.url", "sqlite::memory:")
    };
    let refused = builder().build().await.map(drop).unwrap_err();
    let message = refused.to_string();
    let errors = match &refused {
        DiError::Multiple(errors) => errors.len(),
        _ => 1,
    };
    assert_eq!(errors, 2, "the database's dependency and the advice, each once: {message}");
    for fix in ["`.link::<Transactions>().link::<TxScope>()`", "`.link::<Transactional>()"] {
        assert!(message.contains(fix), "{fix} in {message}");
    }
    // The links the message gives, in one round.
    let app = builder().link::<Transactional>().link::<Transactions>().link::<TxScope>().build().await.unwrap();
    let notes = app.get_object::<Notes>().unwrap();
    assert_eq!(app.run_in_context(notes.count()).await.unwrap(), 1);
}
