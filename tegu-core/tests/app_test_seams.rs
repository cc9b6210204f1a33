//! The seams tests use: fakes by trait, fetching providers, seeded scopes, building from roots,
//! expected providers. Hand-registered graphs (`without_inventory`), so each test builds exactly
//! what it names.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{
    App, AppBuilder, ContextRef, DiError, Keyed, ProtoDef,
    registry::{Dependency, InjectKind},
};

trait Mailer: Send + Sync {
    fn send(&self, to: &str) -> String;
}

struct Smtp;
impl Mailer for Smtp {
    fn send(&self, to: &str) -> String {
        format!("smtp to {to}")
    }
}

struct Sendmail;
impl Mailer for Sendmail {
    fn send(&self, to: &str) -> String {
        format!("sendmail to {to}")
    }
}

#[derive(Default)]
struct FakeMailer {
    sent: Mutex<Vec<String>>,
}
impl Mailer for FakeMailer {
    fn send(&self, to: &str) -> String {
        self.sent.lock().unwrap().push(to.to_owned());
        format!("fake to {to}")
    }
}

struct Signup {
    mailer: Arc<dyn Mailer>,
    all: Vec<Arc<dyn Mailer>>,
    named: Keyed<dyn Mailer>,
}

fn mailers() -> AppBuilder {
    App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).name("smtp").provides::<Smtp, dyn Mailer>(|m| m))
        .register(
            ProtoDef::singleton::<Sendmail>(|_| Ok(Sendmail)).name("sendmail").provides::<Sendmail, dyn Mailer>(|m| m),
        )
}

fn signup() -> ProtoDef {
    ProtoDef::singleton::<Signup>(|r| Ok(Signup { mailer: r.arc(0)?, all: r.all(1)?, named: r.keyed(2)? }))
        .dep(Dependency::new::<dyn Mailer>(InjectKind::Arc, Some("smtp")))
        .dep(Dependency::new::<dyn Mailer>(InjectKind::All, None))
        .dep(Dependency::new::<dyn Mailer>(InjectKind::Keyed, None))
}

#[tokio::test]
async fn a_fake_replaces_the_provider_of_a_trait_for_every_consumer() {
    let fake = Arc::new(FakeMailer::default());
    let app =
        mailers().register(signup()).override_provider_named::<dyn Mailer>("smtp", fake.clone()).build().await.unwrap();
    let signup = app.get_object::<Signup>().unwrap();
    assert_eq!(signup.mailer.send("ada"), "fake to ada", "the named injection gets the fake");
    let sent: Vec<String> = signup.all.iter().map(|m| m.send("bob")).collect();
    assert_eq!(sent, ["sendmail to bob", "fake to bob"], "the list holds the fake in the replaced one's place");
    assert_eq!(signup.named.get("smtp").unwrap().send("cy"), "fake to cy");
    assert_eq!(*fake.sent.lock().unwrap(), ["ada", "bob", "cy"]);
    assert!(app.get_object::<Smtp>().is_err(), "the replaced proto is gone");

    // Unnamed: every provider is replaced by the same fake.
    let app = mailers().override_provider::<dyn Mailer>(fake.clone()).build().await.unwrap();
    assert_eq!(app.get_provider_named::<dyn Mailer>("sendmail").unwrap().send("dee"), "fake to dee");
}

trait Health: Send + Sync {
    fn ok(&self) -> bool;
}
impl Health for Smtp {
    fn ok(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_provider_of_other_traits_too_stays_for_those() {
    let fake: Arc<dyn Mailer> = Arc::new(FakeMailer::default());
    let app = App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<Smtp>(|_| Ok(Smtp))
                .provides::<Smtp, dyn Mailer>(|m| m)
                .provides::<Smtp, dyn Health>(|m| m),
        )
        .override_provider::<dyn Mailer>(fake)
        .build()
        .await
        .unwrap();
    assert_eq!(app.get_provider::<dyn Mailer>().unwrap().send("ada"), "fake to ada");
    assert!(app.get_provider::<dyn Health>().unwrap().ok(), "Smtp still provides Health");
}

#[tokio::test]
async fn an_override_that_matches_nothing_lists_the_providers() {
    let fake: Arc<dyn Mailer> = Arc::new(FakeMailer::default());
    let e = mailers().override_provider_named::<dyn Mailer>("postfix", fake.clone()).build().await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "cannot override the provider of `dyn app_test_seams::Mailer` named \"postfix\": no proto provides it under that name; the providers of `dyn app_test_seams::Mailer` are: app_test_seams::Sendmail (\"sendmail\"), app_test_seams::Smtp (\"smtp\")"
    );
    let e = App::builder().without_inventory().override_provider::<dyn Mailer>(fake).build().await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "cannot override the provider of `dyn app_test_seams::Mailer`: no proto provides it; the providers of `dyn app_test_seams::Mailer` are: none"
    );
}

#[tokio::test]
async fn providers_are_fetched_by_trait_and_name() {
    let app = mailers().build().await.unwrap();
    assert_eq!(app.get_provider_named::<dyn Mailer>("sendmail").unwrap().send("ada"), "sendmail to ada");
    let e = app.get_provider::<dyn Mailer>().err().unwrap();
    assert!(
        e.to_string().contains(
            "which 2 protos provide (app_test_seams::Sendmail (\"sendmail\"), app_test_seams::Smtp (\"smtp\"))"
        ),
        "{e}"
    );
    let e = app.get_provider_named::<dyn Mailer>("postfix").err().unwrap();
    assert_eq!(
        e.to_string(),
        "no proto of type `dyn app_test_seams::Mailer` named \"postfix\" is registered in this App"
    );
    // A proto's own type is a provider too.
    assert_eq!(app.get_provider::<Smtp>().unwrap().send("bo"), "smtp to bo");
}

trait Clock: Send + Sync {
    fn now(&self) -> u64;
}

/// Per request: the time the request started.
struct RequestClock(u64);
impl Clock for RequestClock {
    fn now(&self) -> u64 {
        self.0
    }
}

struct User(&'static str);

static SESSION_INITS: AtomicUsize = AtomicUsize::new(0);
static SESSION_DESTROYS: AtomicUsize = AtomicUsize::new(0);

struct Session {
    user: &'static str,
}

struct Greeter {
    user: ContextRef<User>,
}

fn scoped() -> AppBuilder {
    App::builder()
        .without_inventory()
        .register(ProtoDef::context::<RequestClock>(|_| Ok(RequestClock(7))).provides::<RequestClock, dyn Clock>(|c| c))
        .register(ProtoDef::context::<User>(|_| Ok(User("anonymous"))))
        .register(
            ProtoDef::context::<Session>(|_| Ok(Session { user: "from the store" }))
                .on_init(|_: Arc<Session>| async {
                    SESSION_INITS.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .on_destroy(|_: Arc<Session>| async {
                    SESSION_DESTROYS.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }),
        )
        .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? })).dep(Dependency::new::<
            User,
        >(
            InjectKind::ContextRef,
            None,
        )))
}

#[tokio::test]
async fn a_scope_starts_with_any_number_of_given_objects_and_runs_no_hook_for_them() {
    let app = scoped().build().await.unwrap();
    let greeter = app.get_object::<Greeter>().unwrap();
    let (inits, destroys) = (SESSION_INITS.load(Ordering::SeqCst), SESSION_DESTROYS.load(Ordering::SeqCst));
    let seen = app
        .scope()
        .with(User("nobody"))
        .unwrap()
        .with(User("ada")) // replaces the first
        .unwrap()
        .with(Session { user: "ada" })
        .unwrap()
        .run(async {
            let spawned = tegu_core::spawn({
                let greeter = greeter.clone();
                async move { greeter.user.get().0 }
            });
            // A seeded async proto counts as built: `get_object_async` returns it, no init runs.
            let session = app.get_object_async::<Session>().await.unwrap();
            (greeter.user.get().0, session.user, spawned.await.unwrap(), app.get_provider::<dyn Clock>().unwrap().now())
        })
        .await;
    assert_eq!(seen, ("ada", "ada", "ada", 7));
    assert_eq!(SESSION_INITS.load(Ordering::SeqCst), inits, "no init hook for a given object");
    assert_eq!(SESSION_DESTROYS.load(Ordering::SeqCst), destroys, "no destroy hook for a given object");

    // Unseeded, the async proto is built through get_object_async, with its hooks.
    let user = app.run_in_context(async { app.get_object_async::<Session>().await.unwrap().user }).await;
    assert_eq!(user, "from the store");
    assert_eq!(SESSION_INITS.load(Ordering::SeqCst), inits + 1);
    assert!(app.get_object_async::<Session>().await.is_err(), "no scope here");

    let e = app.scope().with(Smtp).err().unwrap();
    assert_eq!(e.to_string(), "no proto of type `app_test_seams::Smtp` is registered in this App");
}

/// A unit of work that counts its hooks and can be told to fail its commit.
#[derive(Default)]
struct UnitOfWork {
    fail_commit: bool,
    commits: AtomicUsize,
    closes: AtomicUsize,
}

async fn units_of_work() -> App {
    let def = ProtoDef::context::<UnitOfWork>(|_| Ok(UnitOfWork::default()))
        .on_complete(|uow: Arc<UnitOfWork>| async move {
            uow.commits.fetch_add(1, Ordering::SeqCst);
            if uow.fail_commit { Err("constraint violated".into()) } else { Ok(()) }
        })
        .on_destroy(|uow: Arc<UnitOfWork>| async move {
            uow.closes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
    App::builder().without_inventory().register(def).build().await.unwrap()
}

#[tokio::test]
async fn a_seed_given_with_hooks_is_completed_and_destroyed_by_the_scope() {
    let app = units_of_work().await;
    let counts = |u: &UnitOfWork| (u.commits.load(Ordering::SeqCst), u.closes.load(Ordering::SeqCst));

    // Untouched by the scope's work: its hooks run all the same.
    let hooked = Arc::new(UnitOfWork::default());
    app.scope().with_hooks(hooked.clone()).unwrap().run(async {}).await;
    assert_eq!(counts(&hooked), (1, 1));

    // Reached from a spawned task of the scope: the same object, hooks once.
    let reached = Arc::new(UnitOfWork::default());
    let same = app
        .scope()
        .with_hooks(reached.clone())
        .unwrap()
        .run(async {
            let app = app.clone();
            tegu_core::spawn(async move { Arc::as_ptr(&app.get_object::<UnitOfWork>().unwrap()) as usize })
                .await
                .unwrap()
        })
        .await;
    assert_eq!(same, Arc::as_ptr(&reached) as usize);
    assert_eq!(counts(&reached), (1, 1));

    // A failing commit fails `try_run`, and the object is still destroyed.
    let failing = Arc::new(UnitOfWork { fail_commit: true, ..UnitOfWork::default() });
    let err = app.scope().with_hooks(failing.clone()).unwrap().try_run(async {}).await.unwrap_err();
    assert!(err.to_string().ends_with("failed: constraint violated"), "{err}");
    assert_eq!(counts(&failing), (1, 1));

    // Cancelled: destroyed (after the end, which `shutdown` waits for), never committed.
    let cancelled = Arc::new(UnitOfWork::default());
    let pending = app.scope().with_hooks(cancelled.clone()).unwrap().run(std::future::pending::<()>());
    assert!(tokio::time::timeout(std::time::Duration::from_millis(20), pending).await.is_err());
    app.shutdown().await.unwrap();
    assert_eq!(counts(&cancelled), (0, 1));

    // Seeding the same proto again without hooks replaces the object and the request for hooks.
    let app = units_of_work().await;
    let (first, second) = (Arc::new(UnitOfWork::default()), Arc::new(UnitOfWork::default()));
    app.scope().with_hooks(first.clone()).unwrap().with_arc(second.clone()).unwrap().run(async {}).await;
    assert_eq!((counts(&first), counts(&second)), ((0, 0), (0, 0)));
}

static BILLING_BUILT: AtomicUsize = AtomicUsize::new(0);

struct Repo;
struct Billing;
struct Audit;
/// Per request, built from a singleton by value.
struct Trace {
    _audit: Arc<Audit>,
}
struct Controller {
    _repo: Arc<Repo>,
    _trace: ContextRef<Trace>,
}

fn rooted() -> AppBuilder {
    App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Repo>(|_| Ok(Repo)))
        .register(ProtoDef::singleton::<Audit>(|_| Ok(Audit)))
        .register(ProtoDef::singleton::<Billing>(|_| {
            BILLING_BUILT.fetch_add(1, Ordering::SeqCst);
            Ok(Billing)
        }))
        .register(
            ProtoDef::context::<Trace>(|r| Ok(Trace { _audit: r.arc(0)? }))
                .dep(Dependency::new::<Audit>(InjectKind::Arc, None)),
        )
        .register(
            ProtoDef::singleton::<Controller>(|r| Ok(Controller { _repo: r.arc(0)?, _trace: r.context_ref(1)? }))
                .dep(Dependency::new::<Repo>(InjectKind::Arc, None))
                .dep(Dependency::new::<Trace>(InjectKind::ContextRef, None)),
        )
}

#[tokio::test]
async fn roots_build_only_what_they_reach() {
    let before = BILLING_BUILT.load(Ordering::SeqCst);
    let app = rooted().root::<Controller>().build().await.unwrap();
    assert_eq!(BILLING_BUILT.load(Ordering::SeqCst), before, "Billing is not reached");
    assert!(app.get_object::<Repo>().is_ok());
    assert!(app.get_object::<Audit>().is_ok(), "reached through the context proto Trace");
    let e = app.get_object::<Billing>().err().unwrap();
    assert_eq!(
        e.to_string(),
        "singleton `app_test_seams::Billing` was not built: it is not reachable from the roots given to `AppBuilder::root`; add it (or something that injects it) as a root"
    );
    assert!(app.run_in_context(async { app.get_object::<Trace>().map(|_| ()) }).await.is_ok());
    app.shutdown().await.unwrap();

    // The whole graph is still validated.
    let e = rooted()
        .register(ProtoDef::singleton::<Sendmail>(|r| r.arc::<dyn Mailer>(0).map(|_| Sendmail)).dep(Dependency::new::<
            dyn Mailer,
        >(
            InjectKind::Arc,
            None,
        )))
        .root::<Controller>()
        .build()
        .await
        .err()
        .unwrap();
    assert!(matches!(e, DiError::Missing { .. }), "{e}");
    let e = rooted().root::<dyn Mailer>().build().await.err().unwrap();
    assert_eq!(e.to_string(), "no proto of type `dyn app_test_seams::Mailer` is registered in this App");
    // A root by trait.
    let app = mailers().register(signup()).root::<dyn Mailer>().build().await.unwrap();
    assert!(matches!(app.get_object::<Signup>(), Err(DiError::NotBuilt { .. })));
    assert!(app.get_provider_named::<dyn Mailer>("smtp").is_ok());
}

#[tokio::test]
async fn expected_providers_report_a_missing_plugin_by_count() {
    let e = mailers().expect_providers::<dyn Mailer>(3).build().await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "`dyn app_test_seams::Mailer` should have at least 3 provider(s), but 2 are registered (app_test_seams::Smtp (\"smtp\"), app_test_seams::Sendmail (\"sendmail\")); if one lives in a crate the program never names, the linker may have dropped its registration: name one of its protos with `App::builder().link::<ThatProto>()`"
    );
    assert!(mailers().expect_providers::<dyn Mailer>(2).build().await.is_ok());
}
