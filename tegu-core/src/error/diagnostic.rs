//! [`DiError`] as a [`miette::Diagnostic`] (cargo feature `miette`): the error's family as its
//! code, and the source lines of the protos and fields it is about, read from disk where the
//! program runs; where the source is not there (a deployed binary), the sites as `file:line`.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock, PoisonError};

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};

use super::{DiError, Site};

/// The code: `tegu::` and the error's family (`tegu::graph`, `tegu::config`, ...).
///
/// The source shown is the file of the error's first site, with a label at each of its sites
/// in that file; the others (in other files, past the end of an edited file, or all of them
/// where the file cannot be read) are listed in the help.
impl Diagnostic for DiError {
    fn code<'a>(&'a self) -> Option<Box<dyn Display + 'a>> {
        Some(Box::new(format!("tegu::{}", format!("{:?}", self.kind()).to_lowercase())))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        let (first, _) = self.sites().into_iter().next()?;
        source(first.file()).map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let sites = self.sites();
        let file = sites.first()?.0.file();
        let text = source(file)?.inner();
        let labels: Vec<LabeledSpan> = sites
            .into_iter()
            .filter(|(site, _)| site.file() == file)
            .filter_map(|(site, what)| offset(text, site).map(|at| LabeledSpan::at(at..at + 1, what)))
            .collect();
        Some(Box::new(labels.into_iter()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn Display + 'a>> {
        let sites = self.sites();
        // The source shown, and the sites labelled in it (what `labels` shows).
        let shown = sites.first().and_then(|(site, _)| Some((site.file(), source(site.file())?.inner())));
        let labelled =
            |site: Site| shown.is_some_and(|(file, text)| site.file() == file && offset(text, site).is_some());
        let rest: Vec<String> =
            sites.iter().filter(|(site, _)| !labelled(site)).map(|(site, what)| format!("at {site}: {what}")).collect();
        (!rest.is_empty()).then(|| Box::new(rest.join("\n")) as Box<dyn Display>)
    }
}

/// Each file read: its text, or `None` where it could not be read.
type Read = HashMap<&'static str, Option<&'static NamedSource<String>>>;

/// The text of `file`, read once and kept for the program's life: the errors that show it
/// come at start-up, and a `Diagnostic` lends its source by reference. `None` where it cannot
/// be read.
///
/// The compiler records a path relative to where it ran: a workspace's root for its members,
/// which is the working folder of `cargo run` there, and a parent of a package's folder, the
/// working folder of its tests. So the path is tried from the working folder and each of its
/// parents.
fn source(file: &'static str) -> Option<&'static NamedSource<String>> {
    static READ: OnceLock<Mutex<Read>> = OnceLock::new();
    let mut read = READ.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    *read.entry(file).or_insert_with(|| {
        let here = std::env::current_dir().ok()?;
        let text = here.ancestors().find_map(|dir| std::fs::read_to_string(dir.join(file)).ok())?;
        Some(Box::leak(Box::new(NamedSource::new(file, text))))
    })
}

/// The byte offset of `site` (1-based line and column, the column counted in characters) in
/// `text`, if the text has it.
fn offset(text: &str, site: Site) -> Option<usize> {
    let line_start = match site.line() {
        1 => 0,
        n => text.match_indices('\n').nth(n as usize - 2)?.0 + 1,
    };
    let line = text[line_start..].split('\n').next()?;
    let column = line.char_indices().nth(site.column() as usize - 1).map_or(line.len(), |(at, _)| at);
    Some(line_start + column)
}
