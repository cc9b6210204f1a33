//! A share of the generated services of tegg's benchmark (see `tegu_codegen::tegg`).

#![allow(missing_docs, missing_debug_implementations)]

include!(concat!(env!("OUT_DIR"), "/services.rs"));
