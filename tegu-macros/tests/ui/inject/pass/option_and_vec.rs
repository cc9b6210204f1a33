//! Every injection shape, resolved at run time.
use std::sync::Arc;

use tegu_core::{context_proto, singleton_proto, App, ContextRef};

pub trait Greeting: Send + Sync {
    fn word(&self) -> &'static str;
}

#[singleton_proto(name = "en", provides(dyn Greeting))]
pub struct English;
impl Greeting for English {
    fn word(&self) -> &'static str {
        "hello"
    }
}

#[singleton_proto(name = "fr", provides(dyn Greeting))]
pub struct French;
impl Greeting for French {
    fn word(&self) -> &'static str {
        "bonjour"
    }
}

pub struct NotRegistered;

#[context_proto]
pub struct Tracer;

#[singleton_proto]
pub struct Greeter {
    #[inject]
    all: Vec<Arc<dyn Greeting>>,
    #[inject(name = "fr")]
    french: Arc<dyn Greeting>,
    #[inject]
    english: Option<Arc<English>>,
    #[inject]
    tracer: ContextRef<Tracer>,
    plain: u32,
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let app = rt.block_on(App::builder().build()).unwrap();
    let greeter = app.get_object::<Greeter>().unwrap();
    assert_eq!(greeter.all.iter().map(|g| g.word()).collect::<Vec<_>>(), ["hello", "bonjour"]);
    assert_eq!(greeter.french.word(), "bonjour");
    assert!(greeter.english.is_some());
    assert_eq!(greeter.plain, 0);
    assert!(rt.block_on(app.run_in_context(async { greeter.tracer.try_get().is_ok() })));
    let _ = NotRegistered;
}
