//! Build script of every flavour crate (`tegg-singleton`, `tegg-context`, `tegg-handwired`,
//! `tegg-handwired-context`): generates its groups and controllers. The flavour is read off the
//! package name; the project size is `tegu_codegen::tegg::total_services`.

use tegu_codegen::tegg::{FlavourCrate, flavour, total_services};

fn main() {
    let name = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let which = FlavourCrate::from_package(&name)
        .unwrap_or_else(|| panic!("`{name}` is not a flavour crate of tegu_codegen::tegg"));
    let total = total_services(std::env::var("TEGG_SERVICES").ok().as_deref(), &std::env::var("PROFILE").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("flavour.rs"), flavour(which, total)).expect("writing the flavour");
    println!("cargo::rerun-if-env-changed=TEGG_SERVICES");
    println!("cargo::rerun-if-changed=../flavour_build.rs");
}
