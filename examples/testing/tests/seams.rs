//! The container's test seams, on the greeting service: a fake by trait, a value for a
//! concrete proto, an App built from a root, scopes given their context objects, and requests
//! through the router without a socket. Each assertion fails if its seam does not work.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use greeter::{Clock, CurrentUser, GreetController, Greeter, Phrasebook};
use tegu_core::{App, DiError};
use tegu_http::RequestHead;
use tower::ServiceExt; // `oneshot`

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The graph `app()` builds, checked with nothing built (`AppBuilder::check`).
#[test]
fn the_graph_checks() {
    App::builder().check().unwrap();
}

/// A clock stopped at one hour.
#[derive(Debug)]
struct FixedClock(u32);

impl Clock for FixedClock {
    fn hour(&self) -> u32 {
        self.0
    }
}

/// An App whose clock says `hour`, built only as far as `Greeter` reaches.
async fn greeter_at(hour: u32) -> Result<App, DiError> {
    App::builder().override_provider::<dyn Clock>(Arc::new(FixedClock(hour))).root::<Greeter>().build().await
}

/// A fake by trait: every consumer of `dyn Clock` gets the fixed clock. Two hours, two
/// greetings: the system clock cannot give both.
#[tokio::test]
async fn a_fake_clock_by_trait_decides_the_greeting() -> TestResult {
    for (hour, expected) in [(9, "good morning, bob, from ada"), (21, "good evening, bob, from ada")] {
        let app = greeter_at(hour).await?;
        let greeter = app.get_object::<Greeter>()?;
        // A scope given its user: `CurrentUser::new` (which needs a request) never runs.
        let greeting = app.scope().with(CurrentUser::named("ada"))?.run(async { greeter.greet("bob") }).await;
        assert_eq!(greeting, expected, "at {hour}:00");
        app.shutdown().await?;
    }
    Ok(())
}

/// A concrete proto replaced by a value, and an App built from a root: the controller, which
/// `Greeter` does not reach, is not built.
#[tokio::test]
async fn a_concrete_proto_replaced_by_a_value_in_an_app_built_from_a_root() -> TestResult {
    let german = Phrasebook {
        morning: "guten Morgen".to_owned(),
        afternoon: "guten Tag".to_owned(),
        evening: "guten Abend".to_owned(),
    };
    let app = App::builder()
        .override_with(german)
        .override_provider::<dyn Clock>(Arc::new(FixedClock(14)))
        .root::<Greeter>()
        .build()
        .await?;
    assert_eq!(app.get_object::<Phrasebook>()?.afternoon, "guten Tag", "the value replaced `Phrasebook::english`");
    let greeter = app.get_object::<Greeter>()?;
    let greeting = app.scope().with(CurrentUser::named("ada"))?.run(async { greeter.greet("bob") }).await;
    assert_eq!(greeting, "guten Tag, bob, from ada");
    let not_built = app.get_object::<GreetController>();
    assert!(matches!(not_built, Err(DiError::NotBuilt { .. })), "{not_built:?}");
    app.shutdown().await?;
    Ok(())
}

/// Code run inside a request scope, without HTTP: the scope is given a request head, and the
/// context objects are built from it as in a request, once per scope.
#[tokio::test]
async fn a_scope_given_a_request_head_builds_the_user_from_it() -> TestResult {
    let app = greeter_at(15).await?;
    let outside = app.get_object::<CurrentUser>();
    assert!(matches!(outside, Err(DiError::NoScope { .. })), "no scope, no current user: {outside:?}");

    let greeter = app.get_object::<Greeter>()?;
    let request = Request::get("/greet/bob").header("x-user", "ada").body(())?;
    let (name, once, greeting) = app
        .scope()
        .with(RequestHead::from_request(&request))?
        .run(async {
            let user = app.get_object::<CurrentUser>()?;
            let again = app.get_object::<CurrentUser>()?;
            Ok::<_, DiError>((user.name().to_owned(), Arc::ptr_eq(&user, &again), greeter.greet("bob")))
        })
        .await?;
    assert_eq!(name, "ada", "built by `CurrentUser::new` from the head's x-user");
    assert!(once, "one CurrentUser per scope");
    assert_eq!(greeting, "good afternoon, bob, from ada");

    // A scope with no request head: the user cannot be built, and the error says why.
    let error = app.run_in_context(async { app.get_object::<CurrentUser>().map(|_| ()) }).await.unwrap_err();
    assert!(error.to_string().contains("there is no request"), "{error}");
    app.shutdown().await?;
    Ok(())
}

/// Whole requests through the router, in-process: the context layer opens a scope per request
/// with its head, the controller answers with the fake clock, and the App's singleton counts
/// the greetings.
#[tokio::test]
async fn requests_through_the_router_without_a_socket() -> TestResult {
    let app = App::builder().override_provider::<dyn Clock>(Arc::new(FixedClock(9))).build().await?;
    let router = tegu_http::router(&app);

    let request = Request::get("/greet/bob").header("x-user", "ada").body(Body::empty())?;
    let response = router.clone().oneshot(request).await?;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(axum::body::to_bytes(response.into_body(), 1024).await?, "good morning, bob, from ada");

    // Another request, another scope: another user.
    let response = router.clone().oneshot(Request::get("/greet/cy").body(Body::empty())?).await?;
    assert_eq!(axum::body::to_bytes(response.into_body(), 1024).await?, "good morning, cy, from stranger");

    let response = router.oneshot(Request::get("/nowhere").body(Body::empty())?).await?;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    assert_eq!(app.get_object::<Greeter>()?.greeted(), 2, "the router's requests used the App's Greeter");
    app.shutdown().await?;
    Ok(())
}
