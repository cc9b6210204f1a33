//! The remedy for registrations dropped by the linker: `AppBuilder::link::<T>()` registers a
//! proto of a crate that the program links but never names (here a plugin that only provides a
//! `dyn Greeting`), and registering it twice (link and inventory) is harmless.

use std::sync::Arc;

use tegu_core::{App, singleton_proto};
use tegu_test_plugin::{French, Greeting};

#[singleton_proto]
struct Welcome {
    #[inject]
    greetings: Vec<Arc<dyn Greeting>>,
}

#[tokio::test]
async fn linked_plugin_provides_its_trait_implementation() {
    let app = App::builder().link::<French>().build().await.unwrap();
    let welcome = app.get_object::<Welcome>().unwrap();
    let words: Vec<&str> = welcome.greetings.iter().map(|g| g.word()).collect();
    assert_eq!(words, ["bonjour"], "linked once, even though inventory may register it too");
}

#[tokio::test]
async fn linking_twice_registers_once() {
    let app = App::builder().link::<French>().link::<French>().build().await.unwrap();
    assert_eq!(app.get_object::<Welcome>().unwrap().greetings.len(), 1);
}
