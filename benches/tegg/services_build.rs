//! Build script of every `tegg-services-K` crate: generates its share of the services. K is
//! read off the package name; the project size is `tegu_codegen::tegg::total_services`.

use tegu_codegen::tegg::{crate_range, services, total_services};

fn main() {
    let name = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let k: usize = name.rsplit('-').next().and_then(|k| k.parse().ok()).expect("package named tegg-services-K");
    let total = total_services(std::env::var("TEGG_SERVICES").ok().as_deref(), &std::env::var("PROFILE").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("services.rs"), services(crate_range(k, total))).expect("writing the services");
    println!("cargo::rerun-if-env-changed=TEGG_SERVICES");
    println!("cargo::rerun-if-changed=../services_build.rs");
}
