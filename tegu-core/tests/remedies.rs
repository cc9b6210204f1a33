//! Each graph error offers the fix that applies to the situation it names, and applying that fix
//! builds: a trait gets `provides(dyn Trait)`, a proto the App does not have gets `link`, a cycle
//! through a context proto gets `ContextRef`, and only that one; a lookup of a type the App does
//! not have names the registered ones that are close.

#![allow(missing_docs, missing_debug_implementations, dead_code)]

use std::sync::Arc;

use tegu_core::registry::{Dependency, InjectKind};
use tegu_core::{App, DiError, ProtoDef, singleton_proto};

pub trait Notifier: Send + Sync {
    fn notify(&self) -> &'static str;
}

/// Implements `Notifier`, but does not say it provides it: the newcomer's first version.
#[singleton_proto]
pub struct Email;
impl Notifier for Email {
    fn notify(&self) -> &'static str {
        "email"
    }
}

/// The fix the message gives, registered by hand: a registered proto that provides the trait
/// would be named instead, as left out of an App built `without_inventory()`.
pub struct Sms;
impl Notifier for Sms {
    fn notify(&self) -> &'static str {
        "sms"
    }
}

#[singleton_proto]
pub struct Signup {
    #[inject]
    notifier: Arc<dyn Notifier>,
}

#[tokio::test]
async fn a_missing_trait_is_given_provides_and_that_builds() {
    let error = App::builder().without_inventory().link::<Signup>().link::<Email>().build().await.err().unwrap();
    assert!(matches!(error, DiError::Missing { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("`#[singleton_proto(provides(dyn Notifier))]`"), "{message}");
    assert!(!message.contains("annotate `dyn"), "a trait cannot be annotated: {message}");
    assert!(message.contains("`ProtoDef::provides::<ThatType, dyn Notifier>(|it| it)`"), "{message}");

    // Applied, by hand, as the message writes it: the implementing proto declares what it provides.
    let sms = ProtoDef::singleton::<Sms>(|_| Ok(Sms)).provides::<Sms, dyn Notifier>(|it| it);
    let app = App::builder().without_inventory().link::<Signup>().register(sms).build().await.unwrap();
    assert_eq!(app.get_object::<Signup>().unwrap().notifier.notify(), "sms");
}

#[singleton_proto]
pub struct Database;

#[singleton_proto]
pub struct Repo {
    #[inject]
    db: Arc<Database>,
}

#[tokio::test]
async fn a_missing_type_is_given_link_and_that_builds() {
    let error = App::builder().without_inventory().link::<Repo>().build().await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("link it with `.link::<Database>()`"), "{message}");
    assert!(!message.contains("annotate `"), "`Database` is annotated already: {message}");

    let app = App::builder().without_inventory().link::<Repo>().link::<Database>().build().await.unwrap();
    assert!(Arc::ptr_eq(&app.get_object::<Repo>().unwrap().db, &app.get_object::<Database>().unwrap()));
}

#[derive(Default)]
struct Cart;
#[derive(Default)]
struct Pricing;

fn context<T: Default + Send + Sync + 'static>() -> ProtoDef {
    ProtoDef::context::<T>(|_| Ok(T::default()))
}

fn dep<T: 'static>(kind: InjectKind) -> Dependency {
    Dependency::new::<T>(kind, None)
}

// Two annotated context protos that take each other by value do not compile (their
// `NEEDS_ASYNC` constants would depend on each other): the cycle reaches `build()` from protos
// registered by hand.
#[tokio::test]
async fn a_cycle_of_context_protos_is_given_a_context_ref_and_that_builds() {
    let cycle = [
        context::<Cart>().dep(dep::<Pricing>(InjectKind::Arc)),
        context::<Pricing>().dep(dep::<Cart>(InjectKind::Arc)),
    ];
    let error = App::builder().without_inventory().register_all(cycle).build().await.unwrap_err();
    let DiError::Cycle { fix, .. } = &error else { panic!("{error}") };
    assert!(
        fix.contains("hold `ContextRef<Pricing>`")
            && fix.contains("where it takes `Pricing` by value")
            && fix.contains("remedies::Cart"),
        "{fix}"
    );

    // Applied: `Cart` holds `ContextRef<Pricing>`.
    let fixed = [
        context::<Cart>().dep(dep::<Pricing>(InjectKind::ContextRef)),
        context::<Pricing>().dep(dep::<Cart>(InjectKind::Arc)),
    ];
    let app = App::builder().without_inventory().register_all(fixed).build().await.unwrap();
    assert!(app.run_in_context(async { app.get_object::<Pricing>().is_ok() }).await);
}

#[singleton_proto]
pub struct Orders {
    #[inject]
    stock: Arc<Stock>,
}

#[singleton_proto]
pub struct Stock {
    #[inject]
    orders: Arc<Orders>,
}

#[tokio::test]
async fn a_cycle_of_singletons_is_not_offered_a_context_ref() {
    let error = App::builder().without_inventory().link::<Orders>().link::<Stock>().build().await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, DiError::Cycle { .. }), "{message}");
    assert!(!message.contains("ContextRef"), "a singleton cannot hold a `ContextRef` to a singleton: {message}");
    assert!(message.contains("into a proto of its own"), "{message}");
}

/// Not registered: its name is one letter from `Database`'s.
pub struct Databse;

#[tokio::test]
async fn get_object_of_an_unregistered_type_names_the_close_ones() {
    let app = App::builder().without_inventory().link::<Database>().link::<Email>().build().await.unwrap();
    let message = app.get_object::<Databse>().err().unwrap().to_string();
    assert!(message.contains("did you mean remedies::Database (\"database\")?"), "{message}");
    let message = app.get_object_named::<Database>("databse").err().unwrap().to_string();
    assert!(message.contains("did you mean remedies::Database (\"database\")?"), "{message}");
    // Nothing close: no suggestion.
    let message = app.get_object::<String>().err().unwrap().to_string();
    assert!(!message.contains("did you mean"), "{message}");
}

/// A client registered by hand (`ProtoDef::singleton`): no `Proto` impl, so the macros cannot
/// tell that an `Arc` of it is a proto's.
#[derive(Default)]
pub struct HttpClient {
    pub id: u32,
}

fn http_client() -> ProtoDef {
    ProtoDef::singleton::<HttpClient>(|_| Ok(HttpClient { id: 7 }))
}

/// The newcomer's version: the field without `#[inject]` would be a second client, built with
/// `Default`.
#[singleton_proto]
pub struct Fetcher {
    client: Arc<HttpClient>,
}

/// The fix the message gives: injected, `external` since the App registers it by hand.
#[singleton_proto]
pub struct FetcherFixed {
    #[inject(external)]
    client: Arc<HttpClient>,
}

#[tokio::test]
async fn an_unmarked_arc_of_a_proto_registered_by_hand_is_refused_naming_the_field_and_inject() {
    let app = || App::builder().without_inventory().register(http_client());
    let error = app().link::<Fetcher>().build().await.expect_err("an unmarked Arc of the App's client refused");
    let message = error.to_string();
    assert_eq!(error.kind(), tegu_core::error::ErrorKind::Graph, "{message}");
    for part in ["remedies::Fetcher", "`client`", "remedies::HttpClient", "`#[inject(external)]`", "`#[inject(skip)]`"]
    {
        assert!(message.contains(part), "{part}: {message}");
    }
    // `check()` says the same, building nothing.
    assert_eq!(app().link::<Fetcher>().check().unwrap_err().to_string(), message);

    // Applied: the App's client.
    let app = app().link::<FetcherFixed>().build().await.unwrap();
    let client = app.get_object::<HttpClient>().unwrap();
    assert!(Arc::ptr_eq(&app.get_object::<FetcherFixed>().unwrap().client, &client));
    assert_eq!(client.id, 7);
}

/// The other forms `Default` fills without the App's object, each named; an `Arc` of a type
/// the App does not have, and a private client asked for with `#[inject(skip)]`, build.
#[singleton_proto]
pub struct Crawler {
    maybe: Option<Arc<HttpClient>>,
    all: Vec<Arc<HttpClient>>,
    boxed: Box<HttpClient>,
    weak: std::sync::Weak<HttpClient>,
}

#[singleton_proto]
pub struct Quiet {
    counter: Arc<std::sync::atomic::AtomicU64>,
    #[inject(skip)]
    private: Arc<HttpClient>,
}

#[tokio::test]
async fn every_unmarked_form_of_a_proto_registered_by_hand_is_refused_and_skip_is_not() {
    let error = App::builder()
        .without_inventory()
        .register(http_client())
        .link::<Crawler>()
        .check()
        .expect_err("the Option, Vec, Box and Weak fields refused");
    let message = error.to_string();
    for field in ["`maybe`", "`all`", "`boxed`", "`weak`"] {
        assert!(message.contains(field), "{field}: {message}");
    }
    let app = App::builder().without_inventory().register(http_client()).link::<Quiet>().build().await.unwrap();
    assert_eq!(app.get_object::<Quiet>().unwrap().private.id, 0, "its own client, as asked");
    // Without the client registered, the fields are plain state.
    assert!(App::builder().without_inventory().link::<Crawler>().check().is_ok());
}

/// A section of the App's, registered with the attribute.
#[tegu_core::config_proto(prefix = "notes")]
#[derive(serde::Deserialize)]
pub struct NotesConfig {
    pub max_len: u32,
}

/// A key of a registered section that an App built `without_inventory()` does not link is not
/// misspelt: the message names the section and the link, not `config_known`, and the link
/// builds with the key read.
#[tokio::test]
async fn a_key_of_a_section_left_out_by_without_inventory_names_the_link() {
    let builder = || App::builder().without_inventory().config_value("notes.max_len", 5);
    let error = builder().build().await.expect_err("nothing reads `notes`");
    let message = error.to_string();
    assert!(
        matches!(&error, DiError::ConfigUnknownKey { section: Some(reader), left_out: true, .. } if reader.ends_with("NotesConfig"))
    );
    assert!(message.contains("section `remedies::NotesConfig` reads it"), "{message}");
    assert!(!message.contains("did you mean"), "the key is right: {message}");
    assert!(message.contains("link it with `.link::<NotesConfig>()`"), "{message}");
    assert!(!message.contains("config_known"), "{message}");

    let app = builder().link::<NotesConfig>().build().await.expect("the link is the fix");
    assert_eq!(app.get_object::<NotesConfig>().unwrap().max_len, 5);
}
