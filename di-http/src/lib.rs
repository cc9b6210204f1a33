//! The HTTP layer of `di-core` on axum.
//!
//! Not written yet: controllers, the per-request context layer and serving land with the
//! di-http issue. Until then, open a context scope per request with
//! [`di_core::App::run_in_context`].
