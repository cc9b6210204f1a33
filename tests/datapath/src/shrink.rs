//! Shrinking: a failing scenario made smaller, one edit at a time, while it still breaks the
//! same invariant (delta debugging over the scenario's tree).

use crate::scenario::{Behave, End, EventSpec, Op, Prop, Scenario};

/// The scenarios one edit smaller or simpler than `s`, the biggest cuts first.
pub fn candidates(s: &Scenario) -> Vec<Scenario> {
    let mut out = Vec::new();
    for i in 0..s.faults.len() {
        let mut c = s.clone();
        c.faults.remove(i);
        out.push(c);
    }
    for i in 0..s.requests.len() {
        let mut c = s.clone();
        c.requests.remove(i);
        // Faults name requests by number: those after the removed one move down.
        for f in &mut c.faults {
            shift(f, i as u16);
        }
        out.push(c);
    }
    if s.instances > 1 {
        let mut c = s.clone();
        c.instances = 1;
        for r in &mut c.requests {
            r.instance = 0;
        }
        out.push(c);
    }
    for i in 0..s.requests.len() {
        for body in body_edits(&s.requests[i].body) {
            let mut c = s.clone();
            c.requests[i].body = body;
            out.push(c);
        }
        let r = &s.requests[i];
        if r.end != End::Ok {
            let mut c = s.clone();
            c.requests[i].end = End::Ok;
            out.push(c);
        }
        if r.overlap {
            let mut c = s.clone();
            c.requests[i].overlap = false;
            out.push(c);
        }
    }
    out
}

fn shift(fault: &mut crate::scenario::Fault, removed: u16) {
    use crate::scenario::Fault::*;
    let down = |r: &mut u16| {
        if *r > removed {
            *r -= 1;
        }
    };
    match fault {
        Busy { request } | PoolExhausted { request } | BrokerFails { request } | BrokerRestart { request } => {
            down(request)
        }
        Stop { request, .. } => down(request),
        BrokerDown { from, to } => {
            down(from);
            down(to);
        }
        CutCommit { .. } => {}
    }
}

/// A body one edit smaller or simpler: an operation removed, a call, task or nested scope
/// replaced by what it runs, an operation simplified, or an edit inside one.
fn body_edits(body: &[Op]) -> Vec<Vec<Op>> {
    let mut out = Vec::new();
    for i in 0..body.len() {
        let mut b = body.to_vec();
        b.remove(i);
        out.push(b);
    }
    for i in 0..body.len() {
        if let Op::Call { body: inner, .. }
        | Op::Retried { body: inner, .. }
        | Op::Spawn { body: inner, .. }
        | Op::ActAs { body: inner, .. } = &body[i]
        {
            let mut b = body.to_vec();
            b.splice(i..=i, inner.iter().cloned());
            out.push(b);
        }
        for simpler in simplify(&body[i]) {
            let mut b = body.to_vec();
            b[i] = simpler;
            out.push(b);
        }
        match &body[i] {
            Op::Call { prop, body: inner, end, caught } => {
                for e in body_edits(inner) {
                    let mut b = body.to_vec();
                    b[i] = Op::Call { prop: *prop, body: e, end: *end, caught: *caught };
                    out.push(b);
                }
            }
            Op::Retried { body: inner, conflicts, end, caught } => {
                for e in body_edits(inner) {
                    let mut b = body.to_vec();
                    b[i] = Op::Retried { body: e, conflicts: *conflicts, end: *end, caught: *caught };
                    out.push(b);
                }
            }
            Op::Spawn { body: inner, detached } => {
                for e in body_edits(inner) {
                    let mut b = body.to_vec();
                    b[i] = Op::Spawn { body: e, detached: *detached };
                    out.push(b);
                }
            }
            Op::ActAs { user, tenant, body: inner } => {
                for e in body_edits(inner) {
                    let mut b = body.to_vec();
                    b[i] = Op::ActAs { user: *user, tenant: *tenant, body: e };
                    out.push(b);
                }
            }
            _ => {}
        }
    }
    out
}

/// `op` a little simpler: its failures taken away, one at a time.
fn simplify(op: &Op) -> Vec<Op> {
    let mut out = Vec::new();
    match op {
        Op::Call { prop, body, end, caught } => {
            if *end != End::Ok {
                out.push(Op::Call { prop: *prop, body: body.clone(), end: End::Ok, caught: *caught });
            }
            if *caught {
                out.push(Op::Call { prop: *prop, body: body.clone(), end: *end, caught: false });
            }
        }
        Op::Retried { body, conflicts, end, caught } => {
            if *conflicts > 0 {
                out.push(Op::Retried { body: body.clone(), conflicts: conflicts - 1, end: *end, caught: *caught });
            }
            if *end != End::Ok {
                out.push(Op::Retried { body: body.clone(), conflicts: *conflicts, end: End::Ok, caught: *caught });
            }
            if *caught {
                out.push(Op::Retried { body: body.clone(), conflicts: *conflicts, end: *end, caught: false });
            }
            out.push(Op::Call { prop: Prop::RequiresNew, body: body.clone(), end: *end, caught: *caught });
        }
        Op::Emit(spec) => {
            let plain = EventSpec {
                external: spec.external,
                before_commit: Behave::Ok,
                after_commit: Behave::Ok,
                after_rollback: Behave::Ok,
            };
            if *spec != plain {
                for change in [
                    EventSpec { before_commit: Behave::Ok, ..*spec },
                    EventSpec { after_commit: Behave::Ok, ..*spec },
                    EventSpec { after_rollback: Behave::Ok, ..*spec },
                ] {
                    if change != *spec {
                        out.push(Op::Emit(change));
                    }
                }
            }
            if spec.external {
                out.push(Op::Emit(EventSpec { external: false, ..*spec }));
            }
        }
        Op::Spawn { body, detached: true } => out.push(Op::Spawn { body: body.clone(), detached: false }),
        Op::ActAs { user, tenant: Some(_), body } => {
            out.push(Op::ActAs { user: *user, tenant: None, body: body.clone() })
        }
        Op::Bad { caught: true } => out.push(Op::Bad { caught: false }),
        _ => {}
    }
    out
}
