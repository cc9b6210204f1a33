//! `Provider<T>` names the transient proto's own type, not a trait it provides.
use tegu_core::{singleton_proto, Provider};

pub trait Draft: Send + Sync {}

#[singleton_proto]
pub struct Composer {
    #[inject]
    drafts: Provider<dyn Draft>,
}

fn main() {}
