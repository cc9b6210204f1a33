//! The reference model: what must hold of a run, given what each call and request answered.
//!
//! A transaction's outcome is read from the database: the rows written in it that no rolled
//! back savepoint undid are all there (committed) or none is (rolled back); some of them is a
//! violation of atomicity. That outcome is then held against what the code answered (a
//! request acknowledged, a method's `Ok` or error), and the events emitted in the transaction
//! against it (their handlers, their rows, the outbox). Each invariant has a name, printed with
//! a violation.

use std::collections::{BTreeMap, BTreeSet};

use tegu_tx::ErrorClass;

use crate::record::{CallObs, EmitObs, HandlerObs, Outcome, Phase, WriteObs};
use crate::run::{Observed, unknown_outcome};
use crate::scenario::{Behave, Db, End, Fault, Op, Prop, Scenario};

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// The invariants, by name, with what each says.
pub const INVARIANTS: &[(&str, &str)] = &[
    ("acknowledged-stored", "what the code acknowledged (a request answered 2xx, a method's Ok) is stored"),
    ("failed-absent", "what failed or rolled back left nothing stored, unless its outcome was unknown"),
    ("atomic", "a transaction's surviving rows are all stored or none is"),
    ("savepoint", "rows of a savepoint rolled back to are not stored"),
    ("joined-transaction", "a method runs in the transaction its propagation gives it"),
    ("write-in-its-transaction", "a method's statements run in its transaction, even after another method ended it"),
    (
        "retried-on-conflict-only",
        "a retried method runs again, each try in a new transaction, after a conflict and only then, at most its retries",
    ),
    ("before-commit-in-transaction", "a before_commit handler runs inside its event's transaction"),
    ("before-commit-lineage", "a before_commit handler sees its emitter's tenant and user"),
    ("before-commit-failure-rolls-back", "a failed before_commit handler leaves its unit uncommitted"),
    (
        "after-commit-once",
        "a committed event reaches its after_commit handlers once (per instance, for an external one), a rolled back one never",
    ),
    ("after-rollback-once", "a rolled back event reaches its after_rollback handler once, a committed one never"),
    ("handler-lineage", "after_commit and after_rollback handlers see their emitter's tenant and user"),
    (
        "dead-letter",
        "a committed external event whose after_commit handler fails is tried `ATTEMPTS` times, then is a dead letter of that handler; no other event is one",
    ),
    (
        "effect-once",
        "an external event's after_commit handler writing in its transaction has its effect at most once per instance, however often the event comes, and a replay's at most once per dead letter; none if it failed and was not replayed",
    ),
    ("replayed-once", "a dead letter replayed once its handler is fixed is handled once, and leaves no dead letter"),
    (
        "cluster-effect-once",
        "an external event's once-per-cluster handler writing in its transaction has its effect at most once in the whole cluster, and once more per dead letter of the cluster replayed",
    ),
    ("external-delivered", "the outbox is drained: every committed external event was published"),
    ("tenant-isolation", "every row a scope reads belongs to its tenant"),
    ("row-tenant", "every row stored carries the tenant of the scope that wrote it"),
    ("tenant-object", "a tenant's object is built from its own tenant's data"),
    ("destroyed-once", "every object built in a process that shuts down is destroyed once"),
    ("no-unexpected-error", "no error class or panic the scenario did not inject"),
    ("deadline", "every scenario ends within its deadline"),
];

/// Checks `observed` against the model of `scenario`.
pub fn check(scenario: &Scenario, observed: &Observed) -> Vec<Violation> {
    let mut model = Model::new(scenario, observed);
    model.transactions();
    model.calls();
    model.retries();
    model.events();
    model.dead_letters();
    model.effects();
    model.cluster_effects();
    model.tenants();
    model.lives();
    model.errors();
    if let Some(hung) = &observed.hung {
        model.v("deadline", hung.clone());
    }
    model.violations
}

/// How many deliveries of committed external events the instances still owe (an instance
/// that has not handled one): what the run waits for before it shuts down.
pub fn deliveries_owed(scenario: &Scenario, observed: &Observed) -> usize {
    let mut model = Model::new(scenario, observed);
    model.transactions();
    let mut owed = 0;
    for e in observed.log.emits.iter().filter(|e| e.spec.external) {
        if model.fate(e) == Some(true) {
            let reached: BTreeSet<u8> = observed
                .log
                .handled
                .iter()
                .filter(|(_, h)| h.id == e.id && h.phase == Phase::AfterCommit)
                .map(|(i, _)| *i)
                .collect();
            owed += usize::from(scenario.instances).saturating_sub(reached.len());
        }
    }
    owed
}

struct Model<'a> {
    scenario: &'a Scenario,
    o: &'a Observed,
    /// Rows stored: tag to tenant.
    rows: BTreeMap<&'a str, &'a str>,
    /// Scopes' outcomes.
    scopes: BTreeMap<u32, Outcome>,
    /// Transactions' outcomes as the database tells them: `Some(true)` committed.
    tx_outcome: BTreeMap<u32, Option<bool>>,
    /// Transactions whose commit's answer was lost (the code was told the outcome is unknown):
    /// their events go to no handler.
    tx_unknown: BTreeSet<u32>,
    violations: Vec<Violation>,
}

impl<'a> Model<'a> {
    fn new(scenario: &'a Scenario, o: &'a Observed) -> Model<'a> {
        let rows = o.rows.iter().map(|(tag, tenant)| (tag.as_str(), tenant.as_str())).collect();
        let mut scopes = BTreeMap::new();
        for (i, outcome) in o.requests.iter().enumerate() {
            scopes.insert(i as u32, *outcome);
        }
        for scope in &o.log.scopes {
            if scope.parent.is_some() {
                scopes.insert(scope.id, scope.outcome);
            }
        }
        let (tx_outcome, tx_unknown) = (BTreeMap::new(), BTreeSet::new());
        Model { scenario, o, rows, scopes, tx_outcome, tx_unknown, violations: Vec::new() }
    }

    fn v(&mut self, invariant: &'static str, detail: String) {
        if !self.violations.iter().any(|v| v.invariant == invariant && v.detail == detail) {
            self.violations.push(Violation { invariant, detail });
        }
    }

    fn call(&self, id: u32) -> Option<&'a CallObs> {
        self.o.log.calls.get(&id)
    }

    /// The savepoints of transaction `tx` around a write or emit on its own task: `nested`
    /// calls made inside `tx`.
    fn savepoints(&self, calls: &[u32], tx: u32) -> Vec<&'a CallObs> {
        calls
            .iter()
            .filter_map(|c| self.call(*c))
            .filter(|c| c.prop == Prop::Nested && c.before == Some(tx) && c.inside == Some(Some(tx)))
            .collect()
    }

    /// Whether every savepoint around it was released.
    fn released(&self, calls: &[u32], tx: u32) -> bool {
        self.savepoints(calls, tx).iter().all(|c| c.result == Some(Ok(())) && !c.panicked)
    }

    fn stored(&self, tag: &str) -> bool {
        self.rows.contains_key(tag)
    }

    /// The writes of each transaction, and those outside any; each transaction's outcome from
    /// the database, held against what the code answered.
    fn transactions(&mut self) {
        let mut by_tx: BTreeMap<u32, Vec<&'a WriteObs>> = BTreeMap::new();
        for w in &self.o.log.writes {
            match w.tx {
                Some(tx) => by_tx.entry(tx).or_default().push(w),
                None => {
                    if w.ok != self.stored(&w.tag) {
                        let what = if w.ok { "acknowledged-stored" } else { "failed-absent" };
                        self.v(
                            what,
                            format!(
                                "row {} outside any transaction: statement ok = {}, stored = {}",
                                w.tag, w.ok, !w.ok
                            ),
                        );
                    }
                }
            }
        }
        for (&tx, writes) in &by_tx {
            let mut survivors = Vec::new();
            for w in writes {
                // A detached task may outlive the savepoints of the methods that spawned it: what
                // it wrote before one was rolled back to is undone, what it wrote after is the
                // transaction's. Either may be stored; its own savepoints hold.
                let (outer, own) = w.calls.split_at(w.outer_calls.min(w.calls.len()));
                if w.ok && self.released(own, tx) && !self.released(outer, tx) {
                    continue;
                }
                if w.ok && self.released(own, tx) {
                    survivors.push(*w);
                } else if self.stored(&w.tag) {
                    let why = if w.ok { "savepoint" } else { "failed-absent" };
                    self.v(
                        why,
                        format!(
                            "row {} of transaction {tx} is stored, though {}",
                            w.tag,
                            if w.ok { "a savepoint around it was rolled back to" } else { "its statement failed" }
                        ),
                    );
                }
            }
            let present = survivors.iter().filter(|w| self.stored(&w.tag)).count();
            let outcome = match (present, survivors.len()) {
                (_, 0) => None,
                (0, _) => Some(false),
                (p, n) if p == n => Some(true),
                (p, n) => {
                    let missing: Vec<&str> =
                        survivors.iter().filter(|w| !self.stored(&w.tag)).map(|w| w.tag.as_str()).collect();
                    self.v("atomic", format!("transaction {tx}: {p} of its {n} rows stored, missing {missing:?}"));
                    Some(true)
                }
            };
            self.tx_outcome.insert(tx, outcome);
            if let Some(committed) = outcome {
                self.expected(tx, committed);
            }
        }
    }

    /// Holds transaction `tx`'s outcome against what the code answered: the calls that began
    /// it, and the scope that committed it.
    fn expected(&mut self, tx: u32, committed: bool) {
        let began: Vec<&'a CallObs> = self
            .o
            .log
            .calls
            .values()
            .filter(|c| c.inside == Some(Some(tx)) && c.before != Some(tx))
            .filter(|c| matches!(c.prop, Prop::Required | Prop::Nested | Prop::RequiresNew))
            .collect();
        let Some(first) = began.first() else { return };
        let ok = |c: &CallObs| c.result == Some(Ok(())) && !c.panicked;
        let unknown = |c: &CallObs| matches!(c.result, Some(Err(Some(class))) if unknown_outcome(class));
        let failed = |c: &CallObs| !ok(c) && !unknown(c) && (c.result.is_some() || c.panicked);
        let scope = self.scopes.get(&first.scope).copied().unwrap_or(Outcome::Unknown);
        let own = first.prop == Prop::RequiresNew || first.detached;
        // A detached task's transaction may be its own or its scope's: either one unknown.
        if (own && unknown(first)) || ((!own || first.detached) && scope == Outcome::Unknown) {
            self.tx_unknown.insert(tx);
        }
        let what = format!(
            "transaction {tx}, begun by call {} ({:?}, request {}, scope {})",
            first.id, first.prop, first.request, first.scope
        );
        if first.prop == Prop::RequiresNew || first.detached {
            // Its own (`requires_new`), or, begun on a task that may have run after the scope's
            // completion phase began, its own or the scope's.
            if ok(first) && !committed && (first.prop == Prop::RequiresNew || scope == Outcome::Ok) {
                self.v("acknowledged-stored", format!("{what}: the call answered Ok, and nothing of it is stored"));
            }
            if failed(first) && committed {
                self.v("failed-absent", format!("{what}: the call failed ({:?}), and it is stored", first.result));
            }
            return;
        }
        // The scope's: committed with the scope, unless the method that began it failed.
        if scope == Outcome::Ok && began.iter().all(|c| ok(c)) && !committed {
            self.v("acknowledged-stored", format!("{what}: the scope was acknowledged, and nothing of it is stored"));
        }
        if matches!(scope, Outcome::Failed | Outcome::Panicked) && committed {
            self.v("failed-absent", format!("{what}: the scope failed ({scope:?}), and it is stored"));
        }
        if began.len() == 1 && failed(first) && committed {
            self.v("failed-absent", format!("{what}: the call failed ({:?}), and it is stored", first.result));
        }
    }

    /// The run's dead letters against its events: each is a committed external event's whose
    /// `after_commit` handler fails, tried `ATTEMPTS` times; each such event that an instance
    /// handled is one; and each replay, once the handlers are fixed, handled it once.
    fn dead_letters(&mut self) {
        use crate::run::ATTEMPTS;
        let log = &self.o.log;
        let stopped = self.scenario.faults.iter().any(|f| matches!(f, Fault::Stop { .. }));
        // SQLite's write lock held long: the handler's effect (a write) fails every try, and an
        // Ok handler's event is a dead letter, rightly.
        let busy = self.scenario.faults.iter().any(|f| matches!(f, Fault::Busy { .. }));
        for d in &log.dead {
            let event = d.event.and_then(|id| log.emits.iter().find(|e| e.id == id));
            let Some(e) = event else {
                self.v("dead-letter", format!("dead letter {} ({}) is of no event of the run", d.number, d.why));
                continue;
            };
            let failing = e.spec.external && (e.spec.after_commit != Behave::Ok || busy);
            let handler = d.handler.as_deref().unwrap_or_default();
            if d.why != "failed"
                || !handler.ends_with("Handlers::shipped_after")
                || !failing
                || self.fate(e) != Some(true)
            {
                self.v(
                    "dead-letter",
                    format!(
                        "event {}: a dead letter ({} by {handler:?}: {:?}), though its after_commit handler is {:?} and its fate {:?}",
                        e.id,
                        d.why,
                        d.error,
                        e.spec.after_commit,
                        self.fate(e)
                    ),
                );
            }
            if d.attempts != ATTEMPTS && !stopped {
                self.v(
                    "dead-letter",
                    format!("event {}: a dead letter after {} tries, not {ATTEMPTS}", e.id, d.attempts),
                );
            }
        }
        for e in log.emits.iter().filter(|e| e.spec.external && e.spec.after_commit != Behave::Ok) {
            if self.fate(e) != Some(true) {
                continue;
            }
            let runs = |fixed: bool| {
                log.handled
                    .iter()
                    .filter(|(_, h)| h.id == e.id && h.phase == Phase::AfterCommit && h.fixed == fixed)
                    .count()
            };
            let (before, after) = (runs(false), runs(true));
            let dead = log.dead.iter().filter(|d| d.event == Some(e.id)).count();
            if !stopped && before != ATTEMPTS as usize * dead {
                self.v(
                    "dead-letter",
                    format!(
                        "event {}: its failing after_commit handler ran {before} times for {dead} dead letter(s)",
                        e.id
                    ),
                );
            }
            // Once per receiver: a second dead letter of the event for one receiver (a process
            // stopped during the tries) finds the first replay's record in its inbox.
            let receivers: BTreeSet<&str> =
                log.dead.iter().filter(|d| d.event == Some(e.id)).map(|d| d.receiver.as_str()).collect();
            // A replay whose commit was cut ran the handler once more.
            let cuts = self.scenario.faults.iter().filter(|f| matches!(f, Fault::CutCommit { .. })).count();
            if after < receivers.len() || after > receivers.len() + cuts {
                self.v(
                    "replayed-once",
                    format!(
                        "event {}: {dead} dead letter(s) of {} receiver(s), and its handler ran {after} times once fixed",
                        e.id,
                        receivers.len()
                    ),
                );
            }
        }
        for (number, answer) in &log.replays {
            if answer != "Handled" {
                self.v("replayed-once", format!("dead letter {number}: its replay answered {answer}"));
            }
        }
        if log.dead_after_replays != 0 {
            self.v("replayed-once", format!("{} dead letters left after their replays", log.dead_after_replays));
        }
    }

    /// Each call of a retried method ran once more after each conflicting try, up to its
    /// retries, and never after a try that did not conflict (a commit whose outcome is
    /// unknown included); each try in a transaction of its own.
    fn retries(&mut self) {
        for r in &self.o.log.retried {
            let most = usize::from(r.conflicts.min(crate::world::RETRIES)) + 1;
            let tries: Vec<&CallObs> = r.tries.iter().filter_map(|id| self.call(*id)).collect();
            let what = format!(
                "request {}: a retried call with {} conflict(s) ran {} tries",
                r.request,
                r.conflicts,
                tries.len()
            );
            if tries.len() > most {
                self.v("retried-on-conflict-only", format!("{what}, at most {most}"));
            }
            // Fewer only when a try ended otherwise than by its conflict: a panic, an error of
            // the database (its `BEGIN` or `COMMIT`), or a try that never returned.
            if let Some(last) = tries.last()
                && tries.len() < most
                && tries.len() <= usize::from(r.conflicts)
                && last.result == Some(Err(None))
                && !last.panicked
            {
                self.v("retried-on-conflict-only", format!("{what}: its conflict was not retried"));
            }
            let mut inside: Vec<u32> = tries.iter().filter_map(|c| c.inside.flatten()).collect();
            let began = inside.len();
            inside.sort_unstable();
            inside.dedup();
            if inside.len() != began {
                self.v("retried-on-conflict-only", format!("{what}, two of them in one transaction"));
            }
        }
    }

    /// Each call ran in the transaction its propagation gives it, and each write in its call's.
    fn calls(&mut self) {
        for c in self.o.log.calls.values() {
            let Some(inside) = c.inside else { continue };
            let wrong = match c.prop {
                Prop::Required | Prop::Mandatory | Prop::Nested => c.before.is_some() && inside != c.before,
                Prop::RequiresNew => inside.is_none() || (c.before.is_some() && inside == c.before),
                Prop::Never => inside.is_some(),
            };
            let begun = matches!(c.prop, Prop::Required | Prop::Nested | Prop::RequiresNew);
            if wrong || (begun && inside.is_none()) {
                self.v(
                    "joined-transaction",
                    format!(
                        "call {} ({:?}, request {}) ran in transaction {inside:?}, with {:?} current before it",
                        c.id, c.prop, c.request, c.before
                    ),
                );
            }
        }
        for w in &self.o.log.writes {
            let Some(call) = w.calls.last().and_then(|c| self.call(*c)) else { continue };
            let Some(inside) = call.inside else { continue };
            if w.ok && w.tx != inside {
                self.v(
                    "write-in-its-transaction",
                    format!(
                        "row {} of call {} ({:?}) was written in transaction {:?}, the call's is {inside:?}",
                        w.tag, call.id, call.prop, w.tx
                    ),
                );
            }
        }
    }

    /// The effects of the external event's `after_commit` handler (rows `a{id}@{instance}#{n}`,
    /// `f` after the instance for those written once the handlers were fixed), each written in
    /// the handler's transaction with the inbox's record, one per receiver: at most one per
    /// event on each instance, whatever was redelivered, republished or retried, plus on
    /// instance 0 (where dead letters are replayed) one per dead letter of the event; at most
    /// one per instance in all; none before the fix for a handler that fails.
    fn effects(&mut self) {
        // By event and instance: all, and those written before the fix.
        let mut count: BTreeMap<(u32, u8), (usize, usize)> = BTreeMap::new();
        for tag in self.rows.keys() {
            let Some((id, rest)) = tag.strip_prefix('a').and_then(|t| t.split_once('@')) else { continue };
            let Some((by, _)) = rest.split_once('#') else { continue };
            let (instance, fixed) = by.strip_suffix('f').map_or((by, false), |i| (i, true));
            if let (Ok(id), Ok(instance)) = (id.parse(), instance.parse()) {
                let entry = count.entry((id, instance)).or_default();
                entry.0 += 1;
                entry.1 += usize::from(!fixed);
            }
        }
        let mut total: BTreeMap<u32, usize> = BTreeMap::new();
        for (&(id, instance), &(n, before_fix)) in &count {
            *total.entry(id).or_default() += n;
            let letters = self.o.log.dead.iter().filter(|d| d.event == Some(id) && d.why == "failed").count();
            let allowed = 1 + if instance == 0 { letters } else { 0 };
            if n > allowed {
                self.v(
                    "effect-once",
                    format!(
                        "event {id}: instance {instance} has its handler's effect {n} times ({letters} dead letter(s))"
                    ),
                );
            }
            let failing = self.o.log.emits.iter().any(|e| e.id == id && e.spec.after_commit != Behave::Ok);
            if failing && before_fix > 0 {
                self.v(
                    "effect-once",
                    format!(
                        "event {id}: its after_commit handler fails, and its effect on instance {instance} is stored"
                    ),
                );
            }
        }
        for (id, n) in total {
            if n > usize::from(self.scenario.instances) {
                self.v(
                    "effect-once",
                    format!("event {id}: its effect is stored {n} times by {} instance(s)", self.scenario.instances),
                );
            }
        }
    }

    /// The effects of the once-per-cluster handler (rows `c{id}@{instance}#{n}`), each written
    /// in its transaction with the cluster's inbox record: at most one per event in the whole
    /// cluster, plus one per dead letter of the cluster's for the event (replayed once the
    /// handlers are fixed).
    fn cluster_effects(&mut self) {
        let mut count: BTreeMap<u32, usize> = BTreeMap::new();
        for tag in self.rows.keys() {
            let Some((id, _)) = tag.strip_prefix('c').and_then(|t| t.split_once('@')) else { continue };
            if let Ok(id) = id.parse() {
                *count.entry(id).or_default() += 1;
            }
        }
        for (id, n) in count {
            let letters = self.o.log.cluster_dead.iter().filter(|d| d.event == Some(id)).count();
            if n > 1 + letters {
                self.v(
                    "cluster-effect-once",
                    format!("event {id}: the cluster has its once-per-cluster handler's effect {n} times ({letters} dead letter(s))"),
                );
            }
        }
    }

    /// Each event's handlers, rows and delivery, against its unit's outcome.
    fn events(&mut self) {
        let instances: BTreeSet<u8> = (0..self.scenario.instances).collect();
        for e in &self.o.log.emits {
            let runs: Vec<&(u8, HandlerObs)> = self.o.log.handled.iter().filter(|(_, h)| h.id == e.id).collect();
            let of = |phase: Phase| runs.iter().filter(|(_, h)| h.phase == phase).collect::<Vec<_>>();
            let (before, after, rollback) = (of(Phase::BeforeCommit), of(Phase::AfterCommit), of(Phase::AfterRollback));
            let fate = self.fate(e);
            let name = format!(
                "event {} ({}, request scope {}, transaction {:?})",
                e.id,
                if e.spec.external { "external" } else { "local" },
                e.scope,
                e.tx
            );
            for (_, h) in &before {
                if let Some(tx) = self.hold_tx(e)
                    && h.tx != Some(tx)
                {
                    self.v(
                        "before-commit-in-transaction",
                        format!("{name}: its before_commit handler ran in transaction {:?}", h.tx),
                    );
                }
                if h.seen != e.seen {
                    self.v(
                        "before-commit-lineage",
                        format!("{name}: emitted as {:?}, its before_commit handler saw {:?}", e.seen, h.seen),
                    );
                }
            }
            for (_, h) in after.iter().chain(rollback.iter()) {
                if h.seen != e.seen {
                    self.v(
                        "handler-lineage",
                        format!("{name}: emitted as {:?}, its {:?} handler saw {:?}", e.seen, h.phase, h.seen),
                    );
                }
            }
            let bc_row = format!("b{}", e.id);
            // The code was told its unit's outcome is unknown: its handlers get nothing.
            let held_by = self.hold_tx(e);
            let untold = held_by.is_some_and(|tx| self.tx_unknown.contains(&tx));
            // An external event no transaction holds is written by a statement of its own: its
            // row is no transaction's, and may be published whatever its scope does later.
            let own_row = e.spec.external && held_by.is_none();
            match fate {
                Some(true) => {
                    // Emitted outside any transaction on a detached task: perhaps after its
                    // scope's completion phase, where its handlers run at once (documented).
                    let late = held_by.is_none() && e.detached;
                    if e.spec.before_commit != Behave::Ok && !late {
                        self.v(
                            "before-commit-failure-rolls-back",
                            format!(
                                "{name}: its before_commit handler's {:?} did not stop the commit",
                                e.spec.before_commit
                            ),
                        );
                    }
                    if before.len() != 1 && !(before.is_empty() && self.stopped_around(e.request)) {
                        self.v(
                            "before-commit-in-transaction",
                            format!("{name}: committed, its before_commit handler ran {} times", before.len()),
                        );
                    }
                    if !rollback.is_empty() {
                        self.v("after-rollback-once", format!("{name}: committed, and its after_rollback handler ran"));
                    }
                    if e.spec.external {
                        let reached: BTreeSet<u8> = after.iter().map(|(i, _)| *i).collect();
                        if reached != instances && self.broker_up_at_end() {
                            self.v(
                                "after-commit-once",
                                format!("{name}: committed, handled by instances {reached:?} of {instances:?}"),
                            );
                        }
                    } else if after.len() != 1 && !((untold || self.stopped_around(e.request)) && after.is_empty()) {
                        self.v(
                            "after-commit-once",
                            format!("{name}: committed, its after_commit handler ran {} times", after.len()),
                        );
                    }
                }
                Some(false) => {
                    if !after.is_empty() && !own_row {
                        self.v(
                            "after-commit-once",
                            format!("{name}: rolled back, and its after_commit handler ran {} times", after.len()),
                        );
                    }
                    if rollback.len() != 1 && !self.stopped_around(e.request) && !(untold && rollback.is_empty()) {
                        self.v(
                            "after-rollback-once",
                            format!("{name}: rolled back, its after_rollback handler ran {} times", rollback.len()),
                        );
                    }
                    // A handler's row written in a transaction follows it (one written outside any
                    // commits on its own).
                    if before.iter().any(|(_, h)| h.tx.is_some()) && self.stored(&bc_row) {
                        self.v(
                            "failed-absent",
                            format!("{name}: rolled back, and its before_commit handler's row is stored"),
                        );
                    }
                }
                None => {
                    if !after.is_empty() && !rollback.is_empty() && !own_row {
                        self.v(
                            "after-rollback-once",
                            format!("{name}: both its after_commit and after_rollback handlers ran"),
                        );
                    }
                }
            }
        }
        if self.o.unpublished > 0 && self.broker_up_at_end() {
            self.v(
                "external-delivered",
                format!("{} external events are still in the outbox, unpublished", self.o.unpublished),
            );
        }
    }

    /// The transaction whose hold has an event: that of the innermost method around it that
    /// runs in one (a `never` method holds nothing of its own), else none (its scope holds it).
    fn hold_tx(&self, e: &EmitObs) -> Option<u32> {
        e.calls.iter().rev().filter_map(|c| self.call(*c)).find_map(|c| c.inside.flatten())
    }

    /// Whether an event's unit committed (`None`: not known from the database).
    fn fate(&self, e: &EmitObs) -> Option<bool> {
        match self.hold_tx(e) {
            Some(tx) => {
                self.tx_outcome.get(&tx).copied().flatten().map(|committed| committed && self.released(&e.calls, tx))
            }
            None => match self.scopes.get(&e.scope) {
                Some(Outcome::Ok) => Some(true),
                Some(Outcome::Failed | Outcome::Panicked) => Some(false),
                _ => None,
            },
        }
    }

    /// Whether the broker is up at the end (always: the scenarios end every down time).
    fn broker_up_at_end(&self) -> bool {
        true
    }

    /// Whether the process that ran request `request` stopped (its handlers may be gone): a
    /// handler runs on a task of its own once its scope ends, and a stop any number of requests
    /// later drops one the runtime has not run yet (on PostgreSQL one waiting for a connection
    /// of the pool, for as long as the requests after it hold them).
    fn stopped_around(&self, request: u16) -> bool {
        let request = u32::from(request);
        self.scenario.faults.iter().any(|f| matches!(f, Fault::Stop { request: r, .. } if u32::from(*r) + 1 >= request))
    }

    /// Tenants: what scopes read, the rows' tenants, the tenants' objects.
    fn tenants(&mut self) {
        for (request, tenant, rows) in &self.o.log.reads {
            for (row_tenant, tag) in rows {
                if row_tenant != tenant {
                    self.v(
                        "tenant-isolation",
                        format!("request {request}, tenant {tenant}, read row {tag} of tenant {row_tenant}"),
                    );
                }
            }
        }
        for w in &self.o.log.writes {
            if let Some(stored) = self.rows.get(w.tag.as_str())
                && Some(*stored) != w.tenant.as_deref()
            {
                self.v(
                    "row-tenant",
                    format!("row {} was written in a scope of {:?}, and is stored as {stored:?}'s", w.tag, w.tenant),
                );
            }
        }
        for e in &self.o.log.emits {
            if let Some(stored) = self.rows.get(format!("b{}", e.id).as_str())
                && Some(*stored) != e.seen.tenant.as_deref()
            {
                self.v(
                    "row-tenant",
                    format!(
                        "the before_commit row of event {} emitted as {:?} is stored as {stored:?}'s",
                        e.id, e.seen.tenant
                    ),
                );
            }
        }
        for (request, scope_tenant, tenant, plan) in &self.o.log.tenant_objects {
            let expected_plan = format!("plan-{tenant}");
            if scope_tenant.as_deref() != Some(tenant.as_str()) || plan.as_deref() != Some(expected_plan.as_str()) {
                self.v(
                    "tenant-object",
                    format!(
                        "request {request} of tenant {scope_tenant:?} got the object of {tenant:?} with plan {plan:?}"
                    ),
                );
            }
        }
    }

    /// Objects built in a process that shut down were destroyed once.
    fn lives(&mut self) {
        if !self.o.shutdown_errors.is_empty() {
            self.v("destroyed-once", format!("shutdown failed: {:?}", self.o.shutdown_errors));
            return;
        }
        if self.o.hung.is_some() {
            return;
        }
        for (generation, (lives, stopped)) in self.o.lives.iter().enumerate() {
            if *stopped {
                continue;
            }
            use std::sync::atomic::Ordering::Relaxed;
            let (built, destroyed) = (lives.probes_built.load(Relaxed), lives.probes_destroyed.load(Relaxed));
            if built != destroyed {
                self.v(
                    "destroyed-once",
                    format!("generation {generation}: {built} context objects built, {destroyed} destroyed"),
                );
            }
            let (created, gone) = (lives.tenants_created.load(Relaxed), lives.tenants_destroyed.load(Relaxed));
            if created != gone {
                self.v(
                    "destroyed-once",
                    format!("generation {generation}: {created} tenant objects built, {gone} destroyed"),
                );
            }
        }
    }

    /// Every error and panic is one the scenario injected, or follows from one.
    fn errors(&mut self) {
        let allowed = allowed(self.scenario);
        for (request, class, text) in &self.o.log.errors {
            let ok = match class {
                Some(class) => allowed.classes.contains(class) || (unknown_outcome(*class) && allowed.cuts),
                None => allowed.texts.iter().any(|t| text.contains(t)),
            };
            if !ok {
                self.v("no-unexpected-error", format!("request {request}: {class:?}: {text}"));
            }
        }
        for (i, outcome) in self.o.requests.iter().enumerate() {
            if *outcome == Outcome::Panicked
                && !has_panic(&self.scenario.requests[i].body, self.scenario.requests[i].end)
            {
                self.v(
                    "no-unexpected-error",
                    format!("request {i} panicked, and the scenario injected no panic in it"),
                );
            }
        }
    }
}

/// What the scenario's faults and operations allow to fail.
struct Allowed {
    classes: Vec<ErrorClass>,
    texts: Vec<&'static str>,
    cuts: bool,
}

fn allowed(s: &Scenario) -> Allowed {
    let mut classes = vec![ErrorClass::Usage];
    let mut texts = vec!["injected"];
    let ops = all_ops(s);
    // A method fails as asked, on a failed statement, or by a rule of its propagation
    // (`mandatory` with no transaction, `never` inside one, `requires_new` inside one on SQLite).
    let fails = s.requests.iter().any(|r| r.end != End::Ok)
        || ops.iter().any(|op| {
            matches!(op, Op::Call { end, .. } | Op::Retried { end, .. } if *end != End::Ok)
                || matches!(op, Op::Bad { .. } | Op::Retried { .. })
                || matches!(op, Op::Call { prop: Prop::Mandatory | Prop::Never | Prop::RequiresNew, .. })
        });
    let handlers_fail = ops.iter().any(|op| matches!(op, Op::Emit(spec) if spec.before_commit != Behave::Ok));
    if fails || handlers_fail || !s.faults.is_empty() {
        // A method that failed rolls back what it began: the others using it (the completion
        // phase's commit included) find it ended.
        classes.push(ErrorClass::Ended);
    }
    if ops.iter().any(|op| matches!(op, Op::Bad { .. })) {
        classes.push(ErrorClass::CheckViolation);
        if s.db == Db::Postgres {
            classes.push(ErrorClass::Aborted);
        }
    }
    if handlers_fail {
        classes.push(ErrorClass::Other);
        texts.push("handler");
    }
    // On SQLite, one writer at a time: another instance, an overlapping request, a task of the
    // request, or the connections of a stopped process not yet closed may hold the write lock
    // past the busy timeout.
    let concurrent = s.instances > 1
        || s.requests.iter().any(|r| r.overlap)
        || ops.iter().any(|op| matches!(op, Op::Spawn { .. }))
        || s.faults.iter().any(|f| matches!(f, Fault::Stop { .. }))
        // A scope of its own (a nested one, a tenant's create) writes while the request's
        // transaction holds the lock: it waits for it (documented).
        || ops.iter().any(|op| matches!(op, Op::ActAs { .. } | Op::TenantObject))
        // A `never` method's statements run outside the request's transaction, which a method
        // it called may have begun: they wait for it.
        || ops.iter().any(|op| matches!(op, Op::Call { prop: Prop::Never, .. }));
    if s.faults.iter().any(|f| matches!(f, Fault::Busy { .. } | Fault::PoolExhausted { .. }))
        || (s.db == Db::Sqlite && concurrent)
    {
        classes.push(ErrorClass::Busy);
        texts.push("busy");
        // A write that found the database busy fails its method, which ends what it began.
        classes.push(ErrorClass::Ended);
    }
    let cuts = s.faults.iter().any(|f| matches!(f, Fault::CutCommit { .. } | Fault::Stop { .. }));
    if cuts {
        classes.extend([
            ErrorClass::ConnectionLost,
            ErrorClass::OutcomeUnknown,
            ErrorClass::Aborted,
            ErrorClass::Ended,
            ErrorClass::Other,
        ]);
        texts.push("connection");
    }
    if ops.iter().any(|op| matches!(op, Op::ActAs { .. })) {
        // A before_commit handler of an event emitted as another tenant (or user) than the
        // transaction's is refused, and fails the commit.
        classes.push(ErrorClass::Other);
        texts.push("another tenant");
    }
    if s.db == Db::Postgres {
        // Row-level security refuses a write outside a transaction (no tenant setting there).
        classes.push(ErrorClass::Other);
        texts.push("row-level security");
        // That fails the request, whose transaction is rolled back: a task of it still
        // running finds the transaction over.
        if ops.iter().any(|op| matches!(op, Op::Spawn { detached: true, .. })) {
            classes.push(ErrorClass::Ended);
        }
    }
    Allowed { classes, texts, cuts }
}

/// Every operation of the scenario, nested ones included.
fn all_ops(s: &Scenario) -> Vec<&Op> {
    fn walk<'a>(body: &'a [Op], out: &mut Vec<&'a Op>) {
        for op in body {
            out.push(op);
            if let Op::Call { body, .. } | Op::Retried { body, .. } | Op::Spawn { body, .. } | Op::ActAs { body, .. } =
                op
            {
                walk(body, out);
            }
        }
    }
    let mut out = Vec::new();
    for r in &s.requests {
        walk(&r.body, &mut out);
    }
    out
}

fn has_panic(body: &[Op], end: End) -> bool {
    fn walk(body: &[Op]) -> bool {
        body.iter().any(|op| match op {
            Op::Call { end: End::Panic, .. } | Op::Retried { end: End::Panic, .. } => true,
            Op::Call { body, .. } | Op::Retried { body, .. } | Op::Spawn { body, .. } | Op::ActAs { body, .. } => {
                walk(body)
            }
            _ => false,
        })
    }
    end == End::Panic || walk(body)
}
