//! `ContextRef<dyn Trait>`: a per-request implementation chosen by trait, through the macros.
//! Each test builds from `without_inventory().link::<..>()`, so it has exactly the protos it
//! names.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tegu_core::{App, AsyncContextRef, ContextRef, DiError, context_proto, scope::RefTarget, singleton_proto};

trait Locale: Send + Sync {
    fn greet(&self) -> String;
}
impl RefTarget for dyn Locale {}

static FRENCH_BUILT: AtomicUsize = AtomicUsize::new(0);

struct French {
    serial: usize,
}
#[context_proto(name = "fr", provides(dyn Locale))]
impl French {
    fn new() -> Self {
        French { serial: FRENCH_BUILT.fetch_add(1, Ordering::SeqCst) }
    }
}
impl Locale for French {
    fn greet(&self) -> String {
        format!("bonjour #{}", self.serial)
    }
}

#[context_proto(name = "en", provides(dyn Locale))]
#[derive(Default)]
struct English;
impl Locale for English {
    fn greet(&self) -> String {
        "hello".to_owned()
    }
}

/// Holds the trait, the same object by its own type, and a named choice.
#[singleton_proto]
struct Greeter {
    #[inject(name = "fr")]
    locale: ContextRef<dyn Locale>,
    #[inject]
    french: ContextRef<French>,
    #[inject(name = "en")]
    english: ContextRef<dyn Locale>,
}

async fn app() -> App {
    App::builder().without_inventory().link::<French>().link::<English>().link::<Greeter>().build().await.unwrap()
}

/// The address of the object behind an `Arc`, whatever its type.
fn addr<T: ?Sized>(obj: &Arc<T>) -> usize {
    Arc::as_ptr(obj).cast::<()>() as usize
}

#[tokio::test]
async fn a_context_ref_to_a_trait_reaches_the_scopes_object_of_its_provider() {
    let app = app().await;
    let greeter = app.get_object::<Greeter>().unwrap();
    let (first, second) = (
        app.run_in_context(async {
            let by_trait = greeter.locale.get();
            // One object per scope, whichever reference reaches it.
            assert_eq!(addr(&by_trait), addr(&greeter.locale.get()));
            assert_eq!(addr(&by_trait), addr(&greeter.french.get()));
            assert_eq!(greeter.locale.with(|l| l.greet()), by_trait.greet());
            assert_eq!(greeter.locale.try_with(|l| l.greet()).unwrap(), by_trait.greet());
            assert_eq!(greeter.english.get().greet(), "hello");
            by_trait.greet()
        })
        .await,
        app.run_in_context(async { greeter.locale.try_get().unwrap().greet() }).await,
    );
    assert_ne!(first, second, "each scope builds its own French");
    assert!(first.starts_with("bonjour #"), "{first}");
}

#[tokio::test]
async fn a_context_ref_to_a_trait_outside_a_scope_says_so() {
    let app = app().await;
    let greeter = app.get_object::<Greeter>().unwrap();
    let err = greeter.locale.try_get().err().unwrap();
    assert!(matches!(err, DiError::NoScope { wanted } if wanted.contains("dyn context_ref_trait::Locale")), "{err:?}");
}

#[tokio::test]
async fn a_fake_for_a_context_provided_trait_stays_reachable_through_the_context_ref() {
    struct Pirate;
    impl Locale for Pirate {
        fn greet(&self) -> String {
            "ahoy".to_owned()
        }
    }
    let app = App::builder()
        .without_inventory()
        .link::<French>()
        .link::<English>()
        .link::<Greeter>()
        .override_provider_named::<dyn Locale>("en", Arc::new(Pirate))
        .build()
        .await
        .unwrap();
    let greeter = app.get_object::<Greeter>().unwrap();
    let greetings = app.run_in_context(async { (greeter.english.get().greet(), greeter.french.get().greet()) }).await;
    assert_eq!(greetings.0, "ahoy");
    assert!(greetings.1.starts_with("bonjour"), "{greetings:?}");
}

// An implementation with an async constructor: reached by trait only through
// `AsyncContextRef`, and a `ContextRef` to it fails `build()` rather than a request.

trait Session: Send + Sync {
    fn user(&self) -> &str;
}
impl RefTarget for dyn Session {}

struct StoredSession {
    user: String,
}
#[context_proto(provides(dyn Session))]
impl StoredSession {
    async fn new() -> StoredSession {
        tokio::task::yield_now().await; // a real one would read a session store
        StoredSession { user: "ada".to_owned() }
    }
}
impl Session for StoredSession {
    fn user(&self) -> &str {
        &self.user
    }
}

#[singleton_proto]
struct Account {
    #[inject]
    session: AsyncContextRef<dyn Session>,
}

/// Only built to fail: never read.
#[allow(dead_code)]
#[singleton_proto]
struct Careless {
    #[inject]
    session: ContextRef<dyn Session>,
}

#[tokio::test]
async fn an_async_implementation_is_reached_by_trait_through_async_context_ref() {
    let app = App::builder().without_inventory().link::<StoredSession>().link::<Account>().build().await.unwrap();
    let account = app.get_object::<Account>().unwrap();
    let user = app.run_in_context(async { account.session.get_async().await.unwrap().user().to_owned() }).await;
    assert_eq!(user, "ada");
}

#[tokio::test]
async fn a_context_ref_to_a_trait_whose_implementation_is_async_fails_the_build() {
    let err =
        App::builder().without_inventory().link::<StoredSession>().link::<Careless>().build().await.err().unwrap();
    assert!(matches!(err, DiError::ContextRefToAsync { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("hold `AsyncContextRef<dyn context_ref_trait::Session>`"), "{text}");
    assert!(text.contains("`context_ref_trait::StoredSession` is built asynchronously"), "{text}");
}

// The same references used from a spawned task, from a destroy hook, and through `get_async`.

static FAREWELLS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Says goodbye in the request's locale when the scope destroys it.
#[context_proto(destroy = farewell)]
struct Farewell {
    #[inject]
    greeter: Arc<Greeter>,
}
impl Farewell {
    async fn farewell(&self) {
        let said = self.greeter.locale.get().greet();
        FAREWELLS.lock().unwrap().push(said);
    }
}

#[tokio::test]
async fn a_context_ref_to_a_trait_works_from_spawned_tasks_destroy_hooks_and_get_async() {
    let app = App::builder()
        .without_inventory()
        .link::<French>()
        .link::<English>()
        .link::<Greeter>()
        .link::<Farewell>()
        .build()
        .await
        .unwrap();
    let greeter = app.get_object::<Greeter>().unwrap();
    let (here, spawned, awaited) = app
        .run_in_context(async {
            app.get_object::<Farewell>().unwrap();
            let here = addr(&greeter.locale.get());
            let spawned = tegu_core::spawn({
                let greeter = greeter.clone();
                async move { addr(&greeter.locale.get()) }
            });
            let awaited = addr(&greeter.locale.get_async().await.unwrap());
            (here, spawned.await.unwrap(), awaited)
        })
        .await;
    assert_eq!((spawned, awaited), (here, here), "one object per scope, whichever task asks");
    let farewells = FAREWELLS.lock().unwrap().clone();
    assert_eq!(farewells.len(), 1, "{farewells:?}");
    assert!(farewells[0].starts_with("bonjour #"), "{farewells:?}");
}

/// Holds a context proto by its own type only.
#[singleton_proto]
struct FrenchOnly {
    #[inject]
    french: ContextRef<French>,
}

#[tokio::test]
async fn a_fake_for_a_context_protos_own_type_is_reached_by_every_accessor() {
    let fake = Arc::new(French { serial: 1000 });
    let app = App::builder()
        .without_inventory()
        .link::<French>()
        .link::<FrenchOnly>()
        .override_provider::<French>(fake.clone())
        .build()
        .await
        .unwrap();
    let holder = app.get_object::<FrenchOnly>().unwrap();
    let seen = app
        .run_in_context(async {
            (
                holder.french.get().serial,
                holder.french.try_get().unwrap().serial,
                holder.french.with(|f| f.serial),
                holder.french.get_async().await.unwrap().serial,
                addr(&holder.french.get()) == addr(&fake),
            )
        })
        .await;
    assert_eq!(seen, (1000, 1000, 1000, 1000, true));
}

/// Takes a context proto by value, by its own type: the macros downcast the object rather than
/// call its cast, and fall back to the cast when the object is stored as another type.
#[context_proto]
struct FrenchLesson {
    #[inject(name = "fr")]
    french: Arc<French>,
}

#[tokio::test]
async fn a_fake_for_an_own_type_reaches_a_by_value_field_and_the_real_one_otherwise() {
    let fake = Arc::new(French { serial: 2000 });
    let faked = App::builder()
        .without_inventory()
        .link::<French>()
        .link::<FrenchLesson>()
        .override_provider::<French>(fake.clone())
        .build()
        .await
        .unwrap();
    let lesson = faked.run_in_context(async { faked.get_object::<FrenchLesson>().unwrap() }).await;
    assert!(addr(&lesson.french) == addr(&fake), "the by-value field holds the fake");

    let real = App::builder().without_inventory().link::<French>().link::<FrenchLesson>().build().await.unwrap();
    let (lesson, french) = real
        .run_in_context(async { (real.get_object::<FrenchLesson>().unwrap(), real.get_object::<French>().unwrap()) })
        .await;
    assert!(Arc::ptr_eq(&lesson.french, &french), "the by-value field holds the scope's object");
}
