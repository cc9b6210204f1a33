//! Every compile error the macros write has a trybuild case that shows it: each message
//! literal given to `error_spanned_by`, `syn::Error::new` or `syn::Error::new_spanned` in
//! `src/` must appear in some `tests/ui/**/*.stderr`. A message assembled elsewhere (a `let`
//! then passed by name) is not seen; the literal parts of a `format!` are.

use std::fs;
use std::path::{Path, PathBuf};

/// The calls whose first string literal is a message a user sees.
const ERROR_CALLS: &[&str] = &["error_spanned_by(", "Error::new(", "Error::new_spanned("];

/// Shorter fixed parts are too common to say which message they came from.
const MIN_PART: usize = 12;

#[test]
fn every_error_message_has_a_ui_case() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stderr: String =
        files(&root.join("tests/ui"), "stderr").iter().map(|f| fs::read_to_string(f).unwrap()).collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in files(&root.join("src"), "rs") {
        let text = fs::read_to_string(&file).unwrap();
        for message in messages(&text) {
            let Some(part) = longest_fixed_part(&message) else { continue };
            checked += 1;
            if !stderr.contains(&part) {
                missing.push(format!("{}: {message}", file.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert!(checked > 50, "found only {checked} messages: has the error-reporting code changed shape?");
    assert!(missing.is_empty(), "compile errors without a trybuild case in tests/ui:\n{}", missing.join("\n"));
}

/// Every case says in its first line, as a `//!` comment, the rule it shows.
#[test]
fn every_ui_case_states_its_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = files(&root.join("tests/ui"), "rs");
    assert!(cases.len() > 50, "found only {} cases: have the UI tests moved?", cases.len());
    let silent: Vec<String> = cases
        .iter()
        .filter(|f| !fs::read_to_string(f).unwrap().starts_with("//! "))
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(silent.is_empty(), "UI cases without a `//!` line stating their rule:\n{}", silent.join("\n"));
}

/// Each attribute has a case that compiles as well as cases that do not.
#[test]
fn every_attribute_has_a_pass_case() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut missing = Vec::new();
    for entry in fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() && files(&dir.join("pass"), "rs").is_empty() {
            missing.push(dir.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    missing.sort();
    assert!(missing.is_empty(), "tests/ui folders without a pass case: {missing:?}");
}

/// The files under `dir` whose name ends in `.{ext}`, sorted.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else { return out };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The first string literal inside each error call of `source`, unescaped (`\"`, `\n` and a
/// `\` line continuation; `{{`/`}}` stay, for `longest_fixed_part`).
fn messages(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in ERROR_CALLS {
        let mut rest = source;
        while let Some(at) = rest.find(call) {
            rest = &rest[at + call.len()..];
            if let Some(literal) = first_literal_in_call(rest) {
                out.push(literal);
            }
        }
    }
    out
}

/// The first `"..."` before the call's closing parenthesis.
fn first_literal_in_call(args: &str) -> Option<String> {
    let mut depth = 0usize;
    let mut chars = args.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return None,
            ')' | ']' | '}' => depth -= 1,
            '\'' => {
                // A char literal such as '"' or a lifetime: skip a quoted character.
                let tail = &args[i + 1..];
                if tail.chars().nth(1) == Some('\'') || tail.starts_with('\\') {
                    let close = tail[1..].find('\'').map_or(0, |p| p + 2);
                    for _ in 0..close {
                        chars.next();
                    }
                }
            }
            '"' => return Some(unescape_literal(&args[i + 1..])),
            _ => {}
        }
    }
    None
}

/// The text of a string literal whose opening quote was just before `body`.
fn unescape_literal(body: &str) -> String {
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('\n') => {
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    out
}

/// The longest part of `message` between `format!` placeholders, with `{{`/`}}` as written
/// in the output; `None` if every part is shorter than [`MIN_PART`].
fn longest_fixed_part(message: &str) -> Option<String> {
    let mut parts = vec![String::new()];
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                parts.last_mut().unwrap().push(c);
            }
            ('{', _) => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                parts.push(String::new());
            }
            (c, _) => parts.last_mut().unwrap().push(c),
        }
    }
    parts.into_iter().map(|p| p.trim().to_owned()).filter(|p| p.len() >= MIN_PART).max_by_key(String::len)
}

#[test]
fn the_scanner_reads_literals_placeholders_and_continuations() {
    let source = r#"cx.error_spanned_by(&x, format!("unknown option `{}`; expected {OPTIONS}", name));
        cx.push(syn::Error::new(span, "a long message, \
             continued on the next line"));
        cx.error_spanned_by(path(&meta, ')'), "write `#[name(\"/p\")]` with {{braces}}");"#;
    assert_eq!(
        messages(source),
        [
            "unknown option `{}`; expected {OPTIONS}",
            "write `#[name(\"/p\")]` with {{braces}}",
            "a long message, continued on the next line",
        ]
    );
    assert_eq!(longest_fixed_part("unknown option `{}`; expected {OPTIONS}").as_deref(), Some("unknown option `"));
    assert_eq!(
        longest_fixed_part("write `#[name(\"/p\")]` with {{braces}}").as_deref(),
        Some("write `#[name(\"/p\")]` with {braces}")
    );
    assert_eq!(longest_fixed_part("`{}` is {}"), None);
}
