//! The words of the messages: a type's name as the user's code writes it, the remedies that
//! depend on what is missing, and the "did you mean" of a misspelled name.

/// `Missing`'s remedy: one that compiles for what is missing. A trait object is provided by a
/// proto that declares it; a type is a proto the App does not have, which `link` registers
/// (an annotated one: a library's, or one left out by `without_inventory()`).
pub(super) fn missing_fix(wanted: &str) -> String {
    match wanted.strip_prefix("dyn ") {
        Some(tr) => {
            let short = short_type(tr);
            format!(
                "declare a provider: `#[singleton_proto(provides(dyn {short}))]` on a type that implements `{short}` (or `ProtoDef::provides::<ThatType, dyn {short}>(|it| it)` for one registered by hand); if that proto is in a crate the program never names, the linker may have dropped it: name it with `App::builder().link::<ThatProto>()`"
            )
        }
        None => {
            let short = short_type(wanted);
            format!(
                "register it: `App::builder().link::<{short}>()` for an annotated proto the App does not have (a library's, such as `tegu_sqlx::Database<Sqlite>`, which its crate leaves to you, or one left out by `without_inventory()` or by the linker), or `.register(ProtoDef::singleton::<{short}>(..))` for a type without the attribute"
            )
        }
    }
}

/// A type's name without its module paths (`Database<Sqlite>` for
/// `tegu_sqlx::Database<sqlx_sqlite::Sqlite>`), as code in the user's crate would write it.
pub(crate) fn short_type(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut word = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(&word));
    out
}

/// The edit distance between two names, by characters and ignoring ASCII case: insertions,
/// deletions, substitutions and swaps of two neighbours each count one (optimal string
/// alignment), so that `ulr` is one from `url`.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    // Three rows: the one before the previous, for swaps.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (previous[j - 1] + cost).min(previous[j] + 1).min(row[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut row);
    }
    previous[b.len()]
}

/// The candidates close enough to `wanted` to be what was meant (a third of its length, at
/// least one edit), closest first, at most three: a "did you mean".
pub(crate) fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = wanted.chars().count().div_ceil(3).max(1);
    let mut near: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(wanted, c), c))
        .filter(|&(d, c)| d <= limit && c != wanted)
        .collect();
    near.sort();
    near.dedup();
    near.into_iter().take(3).map(|(_, c)| c).collect()
}

/// The crate and proto that read a configuration section the tegu crates define, and how to
/// have it built: what a key of that section means when no proto of the App reads it.
const SECTIONS_OF_THE_TEGU_CRATES: &[(&str, &str)] = &[
    (
        "database",
        "tegu-sqlx's `Database`, which its crate leaves to you: `App::builder().link::<tegu_sqlx::Database<tegu_sqlx::Postgres>>()` (or `Sqlite`)",
    ),
    ("outbox", "tegu-outbox's `Outbox`: `App::builder().register(tegu_outbox::Outbox::proto())`"),
    ("nats", "tegu-nats' `JetStream`: `App::builder().register(tegu_nats::JetStream::proto())`"),
];

/// `ConfigUnknownKey`'s remedy for a key under no section: the proto that would read it, where
/// a tegu crate defines the section (the App does not build it, which is the real problem),
/// else a fix of the name or a declaration for code that reads it itself.
pub(super) fn unread_section_fix(key: &str) -> String {
    let section = key.split('.').next().unwrap_or_default();
    match SECTIONS_OF_THE_TEGU_CRATES.iter().find(|(name, _)| *name == section) {
        Some((_, proto)) => format!("`[{section}]` is read by {proto}; this App does not build it"),
        None => format!(
            "fix its name or remove it; if code reads it with `App::config().get`, declare it: `AppBuilder::config_known(\"{section}\")`, or `ProtoDef::reads_config::<T>(\"{section}\")` for a factory that reads it"
        ),
    }
}

/// `ConfigUnknownKey`'s remedy for a key that a registered config section `reader` reads, left
/// out of an App built `without_inventory()`: the link, not a change of the key.
pub(super) fn left_out_reader_fix(reader: &str) -> String {
    format!(
        "section `{reader}` reads it, and this App, built `without_inventory()`, leaves it out: link it with `.link::<{}>()`",
        short_type(reader)
    )
}

#[cfg(test)]
mod tests {
    use super::{closest, edit_distance, short_type};

    #[test]
    fn edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("url", "ulr"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("Database", "database"), 0);
        assert_eq!(edit_distance("max_conections", "max_connections"), 1);
    }

    #[test]
    fn closest_offers_near_names_only_closest_first() {
        let names = ["port", "host", "path", "url"];
        assert_eq!(closest("prot", names), ["port"]);
        assert_eq!(closest("hots", names), ["host"]);
        assert!(closest("timeout", names).is_empty());
        assert!(closest("port", ["port"]).is_empty(), "the name itself is no suggestion");
    }

    #[test]
    fn a_type_is_shown_as_the_caller_names_it() {
        assert_eq!(short_type("tegu_sqlx::Database<sqlx_sqlite::Sqlite>"), "Database<Sqlite>");
        assert_eq!(short_type("my_app::Notifier"), "Notifier");
        assert_eq!(short_type("alloc::vec::Vec<alloc::sync::Arc<a::B>>"), "Vec<Arc<B>>");
    }
}
