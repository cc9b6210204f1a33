//! The attribute macros of `di-core`. Depend on `di-core`, which re-exports them; this crate's
//! API is not meant to be used directly.
//!
//! Not written yet: the macros land with the di-macros issue. Until then, register protos by
//! hand with `di_core::ProtoDef`.
