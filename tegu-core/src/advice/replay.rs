//! [`Replay`]: the step the macros build for an advice use that runs the rest of its call more
//! than once (tegu-tx's `retry`), each time with a fresh copy of the arguments.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Step;

pin_project! {
    /// A step that can run again: it keeps the arguments, and each run takes a clone of them.
    #[doc(hidden)]
    pub struct Replay<A, D, F, Fut> {
        args: A,
        show: D,
        run: F,
        #[pin]
        running: Option<Fut>,
    }
}

impl<A, D, F, Fut> Replay<A, D, F, Fut> {
    /// `run` applied to a copy of `args` at each run, which `show` formats.
    #[inline(always)]
    pub fn new(args: A, show: D, run: F) -> Self
    where
        A: Clone,
        F: Fn(A) -> Fut,
    {
        Replay { args, show, run, running: None }
    }
}

impl<A, D, F, Fut> fmt::Debug for Replay<A, D, F, Fut>
where
    D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.show)(&self.args, f)
    }
}

impl<R, A, D, F, Fut> Step<R> for Replay<A, D, F, Fut>
where
    A: Clone,
    D: Fn(&A, &mut fmt::Formatter<'_>) -> fmt::Result,
    F: Fn(A) -> Fut,
    Fut: Future<Output = R>,
{
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }

    fn poll_step(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let mut this = self.project();
        if this.running.is_none() {
            let fut = (this.run)(this.args.clone());
            this.running.set(Some(fut));
        }
        match this.running.as_pin_mut() {
            Some(fut) => fut.poll(cx),
            None => unreachable!("set above"),
        }
    }

    /// Drops the run in progress or finished: the next poll starts another.
    fn rearm(self: Pin<&mut Self>) -> bool {
        self.project().running.set(None);
        true
    }

    fn replayable(&self) -> bool {
        true
    }

    fn cancel(self: Pin<&mut Self>) {
        self.project().running.set(None);
    }
}
