//! Attribute and option names, in one place (serde's `symbol.rs`).

pub(crate) const INJECT: &str = "inject";
pub(crate) const NAME: &str = "name";
pub(crate) const PROVIDES: &str = "provides";
pub(crate) const ACCESS: &str = "access";
pub(crate) const INIT: &str = "init";
pub(crate) const COMPLETE: &str = "complete";
pub(crate) const DESTROY: &str = "destroy";
pub(crate) const CRATE: &str = "crate";
pub(crate) const PUBLIC: &str = "public";
pub(crate) const PRIVATE: &str = "private";

pub(crate) const PROFILE: &str = "profile";
pub(crate) const INSTANCES_OF: &str = "instances_of";
pub(crate) const PREFIX: &str = "prefix";
pub(crate) const INSTANCES: &str = "instances";
pub(crate) const EXTERNAL: &str = "external";
pub(crate) const SKIP: &str = "skip";
pub(crate) const CONSTRUCTOR: &str = "constructor";

pub(crate) const LAZY: &str = "lazy";
pub(crate) const ORDER: &str = "order";
pub(crate) const RELOADABLE: &str = "reloadable";
pub(crate) const PATH: &str = "path";
pub(crate) const MIDDLEWARE: &str = "middleware";
pub(crate) const METHOD: &str = "method";

/// The route attributes of `#[http_routes]` and the HTTP method each stands for.
pub(crate) const ROUTE_ATTRS: &[(&str, &str)] = &[
    ("get", "GET"),
    ("post", "POST"),
    ("put", "PUT"),
    ("delete", "DELETE"),
    ("patch", "PATCH"),
    ("head", "HEAD"),
    ("options", "OPTIONS"),
    ("trace", "TRACE"),
];
/// The general form: `#[route("/path", method = "GET")]`.
pub(crate) const ROUTE: &str = "route";
pub(crate) const HTTP_METHODS: &[&str] =
    &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT"];
