//! A fake given to `override_provider` for a proto's own type, injected as `#[inject] x:
//! Arc<T>`: stored as another type, it reaches the generated factory through its target's
//! cast (fill's rare path), as the fake itself, with its strong count kept exact.

use std::sync::Arc;

use tegu_core::{App, context_proto, singleton_proto};

/// The proto faked.
#[singleton_proto]
#[derive(Debug, Default)]
pub struct Repo {
    name: &'static str,
}

/// A singleton that injects it.
#[singleton_proto]
#[derive(Debug)]
pub struct Service {
    #[inject]
    repo: Arc<Repo>,
}

/// A context object that injects it and the singleton.
#[context_proto]
#[derive(Debug)]
pub struct Handler {
    #[inject]
    repo: Arc<Repo>,
    #[inject]
    service: Arc<Service>,
}

#[tokio::test]
async fn a_fake_of_a_proto_s_own_type_reaches_singletons_and_context_objects() {
    let fake = Arc::new(Repo { name: "fake" });
    let app = App::builder().override_provider::<Repo>(fake.clone()).build().await.unwrap();
    let service = app.get_object::<Service>().unwrap();
    assert!(Arc::ptr_eq(&service.repo, &fake), "the singleton holds the fake");
    assert_eq!(service.repo.name, "fake");

    for _ in 0..3 {
        let app = &app;
        let fake = fake.clone();
        app.scope()
            .run(async move {
                let handler = app.get_object::<Handler>().unwrap();
                assert!(Arc::ptr_eq(&handler.repo, &fake), "the context object holds the fake");
                assert!(Arc::ptr_eq(&handler.service, &app.get_object::<Service>().unwrap()));
            })
            .await;
    }
    drop(service);
    app.shutdown().await.unwrap();
    drop(app);
    assert_eq!(Arc::strong_count(&fake), 1, "every count the container took of the fake is given back");
}

#[tokio::test]
async fn without_a_fake_the_object_is_the_container_s_own() {
    let app = App::builder().build().await.unwrap();
    let service = app.get_object::<Service>().unwrap();
    assert!(Arc::ptr_eq(&service.repo, &app.get_object::<Repo>().unwrap()));
    assert_eq!(service.repo.name, "");
}
