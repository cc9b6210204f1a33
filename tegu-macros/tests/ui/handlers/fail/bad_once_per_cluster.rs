//! `once_per_cluster` marks a handler after the commit, once, without a value.
use tegu_core::{handlers, singleton_proto};

pub struct Shipped;

#[singleton_proto]
pub struct Mailer;

#[handlers]
impl Mailer {
    #[event_handler(before_commit, once_per_cluster)]
    async fn in_the_scope(&self, _: &Shipped) {}

    #[event_handler(once_per_cluster, after_rollback)]
    async fn after_a_rollback(&self, _: &Shipped) {}

    #[event_handler(once_per_cluster, once_per_cluster)]
    async fn twice(&self, _: &Shipped) {}

    #[event_handler(once_per_cluster = true)]
    async fn with_a_value(&self, _: &Shipped) {}
}

fn main() {}
