//! A greeting service written to be tested: its tests (`tests/seams.rs`) use each seam of the
//! container on it.
//!
//! - [`Clock`] is a trait, provided by [`SystemClock`]: a test replaces it for every consumer
//!   with a fixed clock (`AppBuilder::override_provider::<dyn Clock>`).
//! - [`Phrasebook`] is a concrete singleton: a test replaces it with another value
//!   (`AppBuilder::override_with`).
//! - [`CurrentUser`] (a context proto, one per request) is built from the request's
//!   [`RequestHead`]; a test opens a scope given a user (`app.scope().with(..)`) or a request
//!   head, no HTTP needed.
//! - [`Greeter`] (a singleton) reaches the current user through a `ContextRef`; a test asks for
//!   it with `app.get_object::<Greeter>()`, from an App built only from what it reaches
//!   (`AppBuilder::root::<Greeter>()`).
//! - [`GreetController`] (`GET /greet/{whom}`) is tested through the router, in-process, with
//!   `tower::ServiceExt::oneshot`: every layer of a real request and no socket (the
//!   `tegu_http::testing` guide).
//!
//! `cargo run -p example-testing` serves it on [`ADDR`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::Path;
use tegu_core::{App, ContextRef, DiError, context_proto, singleton_proto};
use tegu_http::{RequestHead, http_controller, http_routes};

/// Where `cargo run -p example-testing` listens.
pub const ADDR: &str = "127.0.0.1:7002";

/// What time it is. A trait, so that a test can stop the clock.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The hour of the day, 0 to 23 (UTC).
    fn hour(&self) -> u32;
}

/// The real clock: the system's, in UTC.
#[singleton_proto(provides(dyn Clock))]
#[derive(Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn hour(&self) -> u32 {
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        u32::try_from(seconds / 3600 % 24).unwrap_or(0)
    }
}

/// The words of a greeting, by time of day.
#[derive(Debug, Clone)]
pub struct Phrasebook {
    /// Until noon.
    pub morning: String,
    /// From noon to 18:00.
    pub afternoon: String,
    /// From 18:00.
    pub evening: String,
}

#[singleton_proto]
impl Phrasebook {
    /// English: the phrasebook the App builds.
    #[constructor]
    pub fn english() -> Phrasebook {
        Phrasebook {
            morning: "good morning".to_owned(),
            afternoon: "good afternoon".to_owned(),
            evening: "good evening".to_owned(),
        }
    }
}

/// Who is asking, one per request: the `x-user` header (a real service would check a token),
/// or `stranger`.
#[derive(Debug)]
pub struct CurrentUser {
    name: String,
}

#[context_proto]
impl CurrentUser {
    /// Reads the request's head; built on first use in each request.
    pub fn new(head: Arc<RequestHead>) -> CurrentUser {
        let name = head.headers().get("x-user").and_then(|v| v.to_str().ok()).unwrap_or("stranger");
        CurrentUser::named(name)
    }
}

impl CurrentUser {
    /// A user made by hand, for a scope opened without a request:
    /// `app.scope().with(CurrentUser::named("ada"))?`.
    pub fn named(name: impl Into<String>) -> CurrentUser {
        CurrentUser { name: name.into() }
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Greets on behalf of the current user, in the words of the time of day. A singleton, built
/// once: it reaches each request's user through a `ContextRef`.
#[singleton_proto]
#[derive(Debug)]
pub struct Greeter {
    #[inject]
    clock: Arc<dyn Clock>,
    #[inject]
    words: Arc<Phrasebook>,
    #[inject]
    user: ContextRef<CurrentUser>,
    greeted: AtomicU64,
}

impl Greeter {
    /// `good morning, bob, from ada`. Inside a context scope: a request, or a test's scope.
    pub fn greet(&self, whom: &str) -> String {
        self.greeted.fetch_add(1, Ordering::Relaxed);
        let words = match self.clock.hour() {
            0..=11 => &self.words.morning,
            12..=17 => &self.words.afternoon,
            _ => &self.words.evening,
        };
        format!("{words}, {whom}, from {}", self.user.get().name())
    }

    /// How many greetings this App has made.
    pub fn greeted(&self) -> u64 {
        self.greeted.load(Ordering::Relaxed)
    }
}

/// `GET /greet/{whom}`: the current user greets `whom`.
#[http_controller(path = "/greet")]
#[derive(Debug)]
pub struct GreetController {
    #[inject]
    greeter: Arc<Greeter>,
}

#[http_routes]
impl GreetController {
    #[get("/{whom}")]
    async fn greet(&self, Path(whom): Path<String>) -> String {
        self.greeter.greet(&whom)
    }
}

/// Builds the App: every proto of the program, the real clock and phrasebook.
///
/// # Errors
///
/// [`DiError`] if the object graph is broken.
pub async fn app() -> Result<App, DiError> {
    App::builder().build().await
}
