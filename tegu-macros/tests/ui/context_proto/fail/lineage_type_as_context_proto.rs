//! A lineage type (it implements `Travels`) annotated with `#[context_proto]`: it would build its
//! own value in every scope and drop the one a scope is seeded with; the message names
//! `lineage_type!`.
use tegu_core::context_proto;
use tegu_core::error::BoxError;
use tegu_core::lineage::Travels;

#[context_proto]
#[derive(Debug, Default)]
pub struct User {
    pub name: String,
}

impl Travels for User {
    const HEADER: &'static str = "x-user";
    fn encode(&self) -> String {
        self.name.clone()
    }
    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(User { name: value.to_owned() })
    }
}

fn main() {}
