//! A lineage type (it implements `Travels`) injected as `ContextRef<T>` before it is declared
//! with `lineage_type!`: the message names the macro, not `#[context_proto]`.
use tegu_core::error::BoxError;
use tegu_core::lineage::Travels;
use tegu_core::{ContextRef, singleton_proto};

#[derive(Debug)]
pub struct User(pub String);

impl Travels for User {
    const HEADER: &'static str = "x-user";
    fn encode(&self) -> String {
        self.0.clone()
    }
    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(User(value.to_owned()))
    }
}

#[singleton_proto]
pub struct Receipts {
    #[inject]
    user: ContextRef<User>,
}

fn main() {}
