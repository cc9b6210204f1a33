//! How an error names a proto: its label, and where the proto and the field that injects are
//! declared in the source.

use std::fmt;
use std::ops::Deref;
use std::panic::Location;

/// A place in the source: the file, line and column the compiler recorded
/// (`src/signup.rs:12:8`). A proto's is where its attribute or its registration is; a field's
/// is its type.
pub type Site = &'static Location<'static>;

/// A proto as an error names it: its label, `my_app::Signup ("signup")` (what `Display`
/// prints, and what the error's message quotes), with where the proto is declared and, for an
/// error about one of its dependencies, the field that declares it. A lookup's error names the
/// call instead (`App::get_object`), with no site.
///
/// `Debug` of a [`DiError`](crate::DiError), which `fn main() -> Result<(), DiError>` prints,
/// lists these sites under the message; [`DiError::sites`](crate::DiError::sites) returns them.
/// It is as small as a `String`, so that the errors that hold one are no larger (a `Result` of
/// them is moved on the request path): the text boxed, the sites in a box of their own, if any.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, DiError, ProtoDef, registry::{Dependency, InjectKind}};
///
/// struct Mailer;
/// struct Signup { mailer: Arc<Mailer> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let (signup, line) = (ProtoDef::singleton::<Signup>(|r| Ok(Signup { mailer: r.arc(0)? })), line!());
/// let (mailer, field_line) = (Dependency::new::<Mailer>(InjectKind::Arc, None).field("mailer"), line!());
/// let err = App::builder().without_inventory().register(signup.dep(mailer)).build().await.unwrap_err();
/// let DiError::Missing { by, .. } = &err else { panic!("{err}") };
/// assert!(by.ends_with("Signup (\"signup\")"), "{by}");
/// assert_eq!(by.declared_at().map(|at| at.line()), Some(line));
/// assert_eq!(by.field_at().map(|(field, at)| (field, at.line())), Some(("mailer", field_line)));
/// // `Debug` shows where, `Display` the message alone.
/// let at = format!("{}:{line}:", by.declared_at().unwrap().file());
/// assert!(format!("{err:?}").contains(&at), "{err:?}");
/// assert!(!err.to_string().contains(&at), "{err}");
/// # }
/// ```
#[derive(Clone)]
pub struct Label {
    text: Box<str>,
    sites: Option<Box<Sites>>,
}

/// Where a [`Label`]'s proto and field are declared.
#[derive(Clone, Copy)]
struct Sites {
    declared: Option<Site>,
    field: Option<(&'static str, Site)>,
}

impl Label {
    /// The label `text` of a proto declared at `declared`.
    pub(crate) fn new(text: String, declared: Option<Site>) -> Self {
        let sites = declared.map(|declared| Box::new(Sites { declared: Some(declared), field: None }));
        Label { text: text.into_boxed_str(), sites }
    }

    /// This label, for an error about the dependency that `field` (if named) declares at `at`.
    pub(crate) fn with_field(mut self, field: Option<&'static str>, at: Option<Site>) -> Self {
        if let Some(at) = at {
            let sites = self.sites.get_or_insert_with(|| Box::new(Sites { declared: None, field: None }));
            sites.field = Some((field.unwrap_or("a dependency"), at));
        }
        self
    }

    /// The label: `my_app::Signup ("signup")`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Where the proto is declared: its attribute's type, or the `ProtoDef` or
    /// `ProtoDescriptor` call that registers it.
    pub fn declared_at(&self) -> Option<Site> {
        self.sites.as_ref()?.declared
    }

    /// The field (or, registered by hand, the `Dependency`) that the error is about, and where
    /// it is declared.
    pub fn field_at(&self) -> Option<(&'static str, Site)> {
        self.sites.as_ref()?.field
    }

    /// The sites, each with what is there, in the order `Debug` lists them: the field first.
    pub(crate) fn sites(&self) -> impl Iterator<Item = (Site, String)> + '_ {
        let field = self.field_at().map(|(field, at)| (at, format!("`{field}` of {}", self.text)));
        let declared = self.declared_at().map(|at| (at, format!("{} is declared here", self.text)));
        field.into_iter().chain(declared)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl Deref for Label {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Label {
    /// Labels are equal when their text is: the sites say where, not which.
    fn eq(&self, other: &Label) -> bool {
        self.text == other.text
    }
}

impl Eq for Label {}

impl PartialEq<str> for Label {
    fn eq(&self, other: &str) -> bool {
        &*self.text == other
    }
}

impl PartialEq<&str> for Label {
    fn eq(&self, other: &&str) -> bool {
        &*self.text == *other
    }
}

impl From<String> for Label {
    /// A label with no site: for an error built by hand.
    fn from(text: String) -> Self {
        Label::new(text, None)
    }
}

/// `labels` joined by `separator`, as a message lists them.
pub(crate) fn join(labels: &[Label], separator: &str) -> String {
    labels.iter().map(Label::as_str).collect::<Vec<_>>().join(separator)
}

#[cfg(test)]
mod tests {
    use super::Label;

    /// The errors that hold labels are moved in `Result`s on the request path: a label with
    /// its sites is no larger than a `String`.
    #[test]
    fn a_label_is_the_size_of_a_string() {
        assert_eq!(size_of::<Label>(), size_of::<String>());
        let label = Label::new("a::B (\"b\")".to_owned(), Some(std::panic::Location::caller()));
        assert_eq!(label.declared_at().map(|at| at.file()), Some(file!()));
        assert_eq!(label, "a::B (\"b\")");
    }

    /// `DiError` is moved in `Result`s on the request path: a variant that grows it costs
    /// every request a larger copy (the largest are 104 bytes on a 64-bit target).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_error_is_at_most_104_bytes() {
        assert!(size_of::<crate::DiError>() <= 104, "{}", size_of::<crate::DiError>());
    }
}
