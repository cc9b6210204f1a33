//! Where the attribute macros register their protos (through `__register_proto!`, in
//! `private.rs`): on Linux and Android, each proto's descriptor is a `static` in one link
//! section, which the linker gathers into an array; elsewhere (and under miri), each is
//! submitted to `inventory`. [`all`] reads both.
//!
//! Why: an `inventory` registration is four items per proto (a node `static`, a constructor
//! function, its `.init_array` entry and the block around them), and a large crate's build
//! spends its time on items per proto; a link-section `static` is one (`docs/decisions.md`
//! has the measurement).
//!
//! The section's name carries tegu-core's minor version, so that two incompatible tegu-cores
//! linked into one program do not read each other's descriptors.

use crate::proto::descriptor::ProtoDescriptor;

inventory::collect!(ProtoDescriptor);

/// The section's name, for its bounds and its empty element here. `__register_proto!`
/// (`private.rs`) writes the same literal into every proto's `static`: a macro exported to the
/// user's crate cannot name this one without another expansion per proto. The tests below and
/// `tests/registry_section.rs` (which finds the macros' protos) check that the two agree.
#[cfg(any(test, all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory))))]
macro_rules! section_name {
    () => {
        "tegu_core_protos_0_2"
    };
}

/// The descriptor of every proto registered in this program: those of the link section, in
/// the order the linker laid them out, then those submitted to `inventory` (by the macros on
/// other targets, or by hand).
pub(crate) fn all() -> impl Iterator<Item = &'static ProtoDescriptor> {
    section::all().iter().chain(inventory::iter::<ProtoDescriptor>)
}

#[cfg(all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory)))]
mod section {
    use std::ptr::addr_of;

    use crate::proto::descriptor::ProtoDescriptor;

    // The bounds the linker defines for a section whose name is a C identifier (GNU ld, gold,
    // lld and mold all do, and all keep such a section whole under `--gc-sections` when these
    // are referenced).
    #[expect(unsafe_code, reason = "declaring linker-defined symbols; read in `all` below")]
    unsafe extern "Rust" {
        #[link_name = concat!("__start_", section_name!())]
        static START: [ProtoDescriptor; 0];
        #[link_name = concat!("__stop_", section_name!())]
        static STOP: [ProtoDescriptor; 0];
    }

    /// An empty element, so that the section, and with it its bounds, exists in a program
    /// that registers no proto through the macros.
    #[used]
    #[expect(unsafe_code, reason = "`link_section`: placing a static in the section the bounds delimit")]
    #[unsafe(link_section = section_name!())]
    static PRESENT: [ProtoDescriptor; 0] = [];

    pub(super) fn all() -> &'static [ProtoDescriptor] {
        let start = addr_of!(START).cast::<ProtoDescriptor>();
        let stop = addr_of!(STOP).cast::<ProtoDescriptor>();
        // Hidden from the optimiser, which sees `START` as an array of no element: the
        // descriptors after it were placed there by the linker.
        let start = std::hint::black_box(start);
        // SAFETY: the section holds only `ProtoDescriptor` statics (`__register_proto!` in
        // `private.rs`, its name versioned with tegu-core so that no other tegu-core's descriptors are in it), each of
        // its size and alignment, so that the linker lays them out back to back from `START` to
        // `STOP`; they are immutable statics, alive for the whole program.
        #[expect(unsafe_code, reason = "the measured reason: docs/decisions.md, \"Protos in a link section\"")]
        unsafe {
            super::between(start, stop)
        }
    }
}

#[cfg(not(all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory))))]
mod section {
    use crate::proto::descriptor::ProtoDescriptor;

    pub(super) fn all() -> &'static [ProtoDescriptor] {
        &[]
    }
}

/// The elements from `start` to `stop`, the bounds of an array of `T` (not the slice's own
/// methods: its length comes from the addresses).
///
/// # Safety
///
/// `start` and `stop` delimit initialised `T`s that are never written and live for the rest
/// of the program, laid out as an array (`stop` is `start` plus a whole number of elements).
#[expect(unsafe_code, reason = "reads the section's bounds as an array; tested under miri")]
#[cfg_attr(
    not(any(test, all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory)))),
    expect(dead_code, reason = "unused where `inventory` registers")
)]
unsafe fn between<T>(start: *const T, stop: *const T) -> &'static [T] {
    let size = size_of::<T>();
    let bytes = (stop as usize).saturating_sub(start as usize);
    assert!(size > 0 && bytes.is_multiple_of(size), "the registry's section is not an array of descriptors");
    // SAFETY: the caller's contract: `bytes / size` initialised, immutable, `'static` `T`s
    // from `start`.
    unsafe { std::slice::from_raw_parts(start, bytes / size) }
}

#[cfg(test)]
mod tests {
    //! Run under miri too: `cargo +nightly miri test -p tegu-core --lib registered`.

    use super::between;

    static ARRAY: [(u64, &str); 3] = [(1, "one"), (2, "two"), (3, "three")];

    #[test]
    fn the_elements_between_two_bounds_are_read_as_an_array() {
        let start = ARRAY.as_ptr();
        // SAFETY: bounds of a `'static` array of three.
        #[expect(unsafe_code, reason = "the function under test is unsafe")]
        let all = unsafe { between(start, start.wrapping_add(3)) };
        assert_eq!(all, &ARRAY);
        #[expect(unsafe_code, reason = "the function under test is unsafe")]
        let none = unsafe { between(start, start) };
        assert!(none.is_empty());
    }

    #[test]
    #[should_panic(expected = "not an array of descriptors")]
    fn bounds_that_cut_an_element_are_refused() {
        let start = ARRAY.as_ptr();
        let stop = start.cast::<u8>().wrapping_add(size_of::<(u64, &str)>() + 1).cast::<(u64, &str)>();
        // SAFETY: refused before any read.
        #[expect(unsafe_code, reason = "the function under test is unsafe")]
        let _ = unsafe { between(start, stop) };
    }

    #[test]
    fn the_section_is_named_for_this_minor_version() {
        // A release that changes the minor version renames the section (here and in
        // `__register_proto!`), so that two tegu-cores in one program read only their own.
        let version = format!("{}_{}", env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
        assert_eq!(section_name!(), format!("tegu_core_protos_{version}"));
        let written = include_str!("../private.rs").matches(concat!("\"", section_name!(), "\"")).count();
        assert_eq!(written, 1, "`__register_proto!` in private.rs writes the same name");
    }

    #[cfg(all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory)))]
    #[test]
    fn this_test_binary_registers_no_proto_and_its_section_reads_empty() {
        // tegu-core's own unit tests annotate no proto: the section holds only `PRESENT`.
        assert!(super::section::all().is_empty());
    }
}
