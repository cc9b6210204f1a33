//! What a caller asks of a [`DiError`]: its family ([`ErrorKind`]), whether it is [`Busy`]
//! (a failure to try again later); and how the container makes and gathers them.

use std::sync::Arc;

use super::{BoxError, DiError, Label, Site};

/// The families of [`DiError`], as [`DiError::kind`] tells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The graph is broken: a dependency missing, ambiguous, cyclic or of the wrong kind, a
    /// role misused. `build()` and `check()` refuse it; the fix is in the code.
    Graph,
    /// A test seam of the builder (`override_with`, `override_provider`, `exclude`,
    /// `expect_providers`) names what the graph does not have.
    Setup,
    /// A configuration source, key or value is wrong, or the profile is not a plain name.
    Config,
    /// A factory, a constructor or a lifecycle hook failed (or panicked).
    Construction,
    /// The App's lifecycle: a deadline passed, a hosted service failed, the App is not built
    /// yet or is shutting down, a singleton left out by the roots.
    Lifecycle,
    /// `get_object` or `Keyed::get` found nothing under the type or name asked for.
    Lookup,
    /// A context object asked for where its scope is not: no scope, a scope that ended or
    /// belongs to another App, no tenant, a tenant key refused, a sync read of an async proto.
    Scope,
    /// An event handler, the event transport or a scheduled job failed.
    Work,
    /// Several errors of different families ([`DiError::Multiple`]).
    Several,
}

/// A failure to try again later: a resource the work needs (a database connection, a lock)
/// did not come free in time. Return it (boxed) where the failure surfaces, or wrap it as the
/// source of your own error; [`DiError::is_busy`] finds it in an error's sources, and tegu-http
/// answers a request whose completion phase failed with it `503 Service Unavailable` with
/// `Retry-After`, not 500. Holds the underlying error. (tegu-tx's `Busy` is this type.)
///
/// # Examples
///
/// ```
/// use tegu_core::{error::Busy, DiError};
///
/// let error = DiError::Hook {
///     stage: "complete",
///     type_name: "my_app::UnitOfWork",
///     name: "unitOfWork".into(),
///     source: std::sync::Arc::new(Busy("the pool timed out".into())),
/// };
/// assert!(error.is_busy());
/// ```
#[derive(Debug, thiserror::Error)]
#[error("no connection or lock came free in time")]
pub struct Busy(#[source] pub BoxError);

impl DiError {
    /// Where the protos this error is about are declared, each with what is there: for an
    /// error about a dependency, the field that declares it, then its proto; for a cycle, each
    /// proto on it; for several errors, theirs in order. What `Debug` lists under the message.
    /// Empty for an error about no proto, or about protos declared by no recorded site.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, DiError, ProtoDef, registry::{Dependency, InjectKind}};
    ///
    /// struct Db;
    /// struct Repo;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let (repo, line) = (ProtoDef::singleton::<Repo>(|_| Ok(Repo)), line!());
    /// let repo = repo.dep(Dependency::new::<Db>(InjectKind::Arc, None).field("db"));
    /// let err = App::builder().without_inventory().register(repo).build().await.unwrap_err();
    /// let sites = err.sites();
    /// assert_eq!(sites.len(), 2, "{err:?}"); // the field, then the proto
    /// assert!(sites[0].1.starts_with("`db` of "), "{:?}", sites[0]);
    /// assert_eq!((sites[1].0.line(), sites[1].0.file()), (line, file!()));
    /// # }
    /// ```
    pub fn sites(&self) -> Vec<(Site, String)> {
        let labels: Vec<&Label> = match self {
            DiError::Missing { by, .. }
            | DiError::UnknownQualifier { by, .. }
            | DiError::Ambiguous { by, .. }
            | DiError::ContextRefToSingleton { by, .. }
            | DiError::ContextRefToAsync { by, .. }
            | DiError::Private { by, .. }
            | DiError::WrongHandle { by, .. }
            | DiError::Inactive { by, .. }
            | DiError::Undeclared { by, .. } => vec![by],
            DiError::CompleteOnSingleton { singleton }
            | DiError::ContextByValue { singleton, .. }
            | DiError::TransientByValue { singleton, .. } => vec![singleton],
            DiError::UninjectedProto { proto, .. }
            | DiError::Lazy { proto, .. }
            | DiError::MustBeSingleton { proto, .. }
            | DiError::TransientHook { transient: proto, .. } => vec![proto],
            // The first is repeated at the end.
            DiError::Cycle { chain, .. } => chain.iter().skip(1).collect(),
            DiError::Multiple(errors) => return errors.iter().flat_map(DiError::sites).collect(),
            _ => Vec::new(),
        };
        labels.into_iter().flat_map(Label::sites).collect()
    }

    /// The family of this error, for a caller that handles a family alike (a broken graph, a
    /// configuration error, a missing scope) rather than each variant. Several errors found in
    /// one pass ([`DiError::Multiple`]) are of their family when they share one, else
    /// [`ErrorKind::Several`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::DiError;
    /// use tegu_core::error::ErrorKind;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let app = tegu_core::App::builder().without_inventory().build().await.unwrap();
    /// let error = app.get_object::<String>().unwrap_err();
    /// assert_eq!(error.kind(), ErrorKind::Lookup);
    /// # }
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            DiError::Missing { .. }
            | DiError::UnknownQualifier { .. }
            | DiError::Ambiguous { .. }
            | DiError::Duplicate { .. }
            | DiError::Cycle { .. }
            | DiError::CompleteOnSingleton { .. }
            | DiError::ContextByValue { .. }
            | DiError::ContextRefToSingleton { .. }
            | DiError::ContextRefToAsync { .. }
            | DiError::UninjectedProto { .. }
            | DiError::Private { .. }
            | DiError::TransientByValue { .. }
            | DiError::WrongHandle { .. }
            | DiError::TransientHook { .. }
            | DiError::Lazy { .. }
            | DiError::Inactive { .. }
            | DiError::AdviceMissing { .. }
            | DiError::AdviceNeeds { .. }
            | DiError::LineageUnmet { .. }
            | DiError::LineageType { .. }
            | DiError::CrosscutMatchesNothing { .. }
            | DiError::CrosscutUnreachable { .. }
            | DiError::OneOfRole { .. }
            | DiError::MustBeSingleton { .. }
            | DiError::Undeclared { .. } => ErrorKind::Graph,
            DiError::OverrideUnknown { .. }
            | DiError::OverrideNoProvider { .. }
            | DiError::ExpectedProviders { .. }
            | DiError::ExcludeUnknown { .. } => ErrorKind::Setup,
            DiError::ConfigInvalid { .. }
            | DiError::ConfigMissing { .. }
            | DiError::ConfigUnknownEnv { .. }
            | DiError::ConfigUnknownKey { .. }
            | DiError::InvalidProfile { .. }
            | DiError::ConfigSource { .. } => ErrorKind::Config,
            DiError::Construction { .. } | DiError::Hook { .. } | DiError::EagerCycle { .. } => ErrorKind::Construction,
            DiError::StartTimeout { .. }
            | DiError::StopTimeout { .. }
            | DiError::Hosted { .. }
            | DiError::ShutDown { .. }
            | DiError::AppNotReady { .. }
            | DiError::ReloadAfterShutdown
            | DiError::NotBuilt { .. } => ErrorKind::Lifecycle,
            DiError::NotFound { .. } | DiError::UnknownInstance { .. } => ErrorKind::Lookup,
            DiError::NoScope { .. }
            | DiError::NoTenant { .. }
            | DiError::NoLineage { .. }
            | DiError::TenantKey { .. }
            | DiError::ScopeClosed { .. }
            | DiError::LateCompletion { .. }
            | DiError::ForeignScope { .. }
            | DiError::AsyncInit { .. } => ErrorKind::Scope,
            DiError::Schedule { .. }
            | DiError::JobFailed { .. }
            | DiError::EventHandler { .. }
            | DiError::EventTransport { .. } => ErrorKind::Work,
            DiError::Multiple(errors) => match errors.first().map(DiError::kind) {
                Some(first) if errors.iter().all(|e| e.kind() == first) => first,
                _ => ErrorKind::Several,
            },
        }
    }

    /// Whether [`Busy`] is among this error's sources: the work failed for want of a resource
    /// that may come free (a failure to try again later, `503`), not for a fault.
    pub fn is_busy(&self) -> bool {
        is_busy(self)
    }

    /// No error, one, or several as [`DiError::Multiple`] (flattened).
    pub(crate) fn collect(errors: Vec<DiError>) -> Result<(), DiError> {
        let mut flat = Vec::with_capacity(errors.len());
        for e in errors {
            match e {
                DiError::Multiple(inner) => flat.extend(inner),
                e => flat.push(e),
            }
        }
        match flat.len() {
            0 => Ok(()),
            1 => Err(flat.remove(0)),
            _ => Err(DiError::Multiple(flat)),
        }
    }

    /// The one place a [`DiError::Construction`] is built.
    pub(crate) fn construction_named(type_name: &'static str, name: &str, source: BoxError) -> Self {
        DiError::Construction { type_name, name: name.to_owned(), source: Arc::from(source) }
    }

    /// Wraps a user error (for instance from a hand-written factory) as a construction failure
    /// of type `T` named `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::DiError;
    /// struct Config;
    /// let err = DiError::construction::<Config>("config", "file not found");
    /// assert!(err.to_string().ends_with("failed: file not found"));
    /// ```
    pub fn construction<T: ?Sized>(name: &str, source: impl Into<BoxError>) -> Self {
        Self::construction_named(core::any::type_name::<T>(), name, source.into())
    }
}

/// Whether `error`, or an error it comes from, is a [`Busy`]: what [`DiError::is_busy`] asks,
/// for any error.
pub(crate) fn is_busy(error: &(dyn std::error::Error + 'static)) -> bool {
    type Shared = Arc<dyn std::error::Error + Send + Sync + 'static>;
    let mut error: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(mut e) = error {
        // A source held in an `Arc` (as `DiError`'s are) shows as the `Arc`: look inside.
        while let Some(inner) = e.downcast_ref::<Shared>() {
            e = &**inner;
        }
        if e.is::<Busy>() {
            return true;
        }
        error = e.source();
    }
    false
}
