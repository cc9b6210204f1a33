//! An error accumulator, as serde's: collect every error of one expansion, then report them
//! together.

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt { errors: RefCell::new(Some(Vec::new())) }
    }

    /// Records an error pointing at `obj`'s tokens.
    pub(crate) fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        self.push(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    pub(crate) fn push(&self, err: syn::Error) {
        self.errors.borrow_mut().as_mut().expect("Ctxt used after check").push(err);
    }

    /// Whether an error is recorded: a later check that would only repeat it stays quiet.
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|e| !e.is_empty())
    }

    /// All errors combined, or `Ok` if there were none. Must be called exactly once.
    pub(crate) fn check(self) -> Result<(), syn::Error> {
        let mut errors = self.errors.borrow_mut().take().expect("Ctxt checked twice").into_iter();
        let Some(mut combined) = errors.next() else { return Ok(()) };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
