//! A field of a form only the container fills, or whose `Default` is useless, without
//! `#[inject]`: one error each, at the field, and none at the proto that injects this one.
use std::sync::Arc;

use tegu_core::{ContextRef, Provider, context_proto, singleton_proto, transient_proto};

pub trait Notifier: Send + Sync {}

#[context_proto]
pub struct Tracer;

#[transient_proto]
pub struct Draft;

#[singleton_proto]
#[derive(Default)]
pub struct Clock;

#[singleton_proto]
pub struct Mailer {
    notifier: Arc<dyn Notifier>,
    tracer: ContextRef<Tracer>,
    drafts: Provider<Draft>,
    clock: Option<Arc<Clock>>,
    clocks: Vec<Arc<Clock>>,
    notifiers: Vec<Arc<dyn Notifier>>,
    by_value: Clock,
}

#[singleton_proto]
pub struct Signup {
    #[inject]
    mailer: Arc<Mailer>,
}

fn main() {}
