//! `#[inject(skip)]` builds a field with `Default`: a type without one, or a handle only the
//! container fills, is refused with a message that names the attribute and the fix.
use tegu_core::{ContextRef, context_proto, singleton_proto};

pub struct Client {
    pub url: String,
}

#[singleton_proto]
pub struct Api {
    #[inject(skip)]
    client: Client,
}

#[context_proto]
#[derive(Default)]
pub struct Session;

#[singleton_proto]
pub struct Greeter {
    #[inject(skip)]
    session: ContextRef<Session>,
}

fn main() {}
