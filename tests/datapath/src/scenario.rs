//! What a scenario is: requests as trees of operations, on one database, with the faults to
//! inject. Generated from a seed ([`crate::generate`]), shrunk ([`mod@crate::shrink`]), written to
//! and read from JSON to replay, and shown as an indented tree.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The database the scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Db {
    /// A SQLite file of its own, the in-memory broker, a current-thread runtime: deterministic
    /// where the driver allows it.
    Sqlite,
    /// The PostgreSQL server of the run (row-level security on), NATS JetStream, both behind a
    /// fault-injecting proxy; a runtime with two worker threads.
    Postgres,
}

/// A `#[transactional]` propagation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Prop {
    /// `required`
    Required,
    /// `requires_new`
    RequiresNew,
    /// `nested`
    Nested,
    /// `mandatory`
    Mandatory,
    /// `never`
    Never,
}

/// How a method (or a request's handler) ends once its operations have run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum End {
    /// With what its operations gave.
    Ok,
    /// With an error of its own (the request: answered as a failure, its scope failed).
    Err,
    /// With a panic.
    Panic,
}

/// What an event handler does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Behave {
    /// Succeeds.
    Ok,
    /// Returns an error.
    Fail,
    /// Panics.
    Panic,
}

/// An event: in the process, or external (through the outbox and the broker to every
/// instance); and what each of its handlers does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSpec {
    /// Carried by the outbox.
    pub external: bool,
    /// The `before_commit` handler.
    pub before_commit: Behave,
    /// The `after_commit` handler (in every instance, for an external event).
    pub after_commit: Behave,
    /// The `after_rollback` handler.
    pub after_rollback: Behave,
}

/// One operation of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Writes a row (the current transaction's, if any), touching the request's context object.
    Write,
    /// Reads the rows the scope may see.
    Read,
    /// A statement that fails (a `CHECK` violation); `caught`: the method goes on.
    Bad {
        /// The method takes the failure in stride.
        caught: bool,
    },
    /// Writes a marker row, then emits an event.
    Emit(EventSpec),
    /// Calls a `#[transactional]` method that runs `body`, then ends as `end`; `caught`: the
    /// caller goes on whatever the call gave (a panic included).
    Call {
        /// Its propagation.
        prop: Prop,
        /// What it runs.
        body: Vec<Op>,
        /// How it ends.
        end: End,
        /// The caller takes its failure in stride.
        caught: bool,
    },
    /// Calls a `#[transactional(requires_new, retry = ..)]` method (`world::RETRIES` retries)
    /// that runs `body`; its first `conflicts` tries then fail with a serialization failure
    /// noted on their transaction (as the adapter notes a real one), and the try after them
    /// ends as `end`. `caught` as for [`Op::Call`].
    Retried {
        /// What each try runs.
        body: Vec<Op>,
        /// How many tries conflict.
        conflicts: u8,
        /// How the first try that does not conflict ends.
        end: End,
        /// The caller takes its failure in stride.
        caught: bool,
    },
    /// Runs `body` on a task of the scope (`tegu_core::spawn`): awaited, or `detached` (the
    /// handler goes on and may return first; the scope waits for the task).
    Spawn {
        /// What the task runs.
        body: Vec<Op>,
        /// Not awaited.
        detached: bool,
    },
    /// Runs `body` in a nested scope of another user (and, if given, another tenant): an
    /// "act as" path. The nested scope's failure is taken in stride.
    ActAs {
        /// The user it acts as.
        user: u8,
        /// The tenant, if another.
        tenant: Option<u8>,
        /// What it runs.
        body: Vec<Op>,
    },
    /// Reads the tenant's object (built by a `create` that reads the tenant's row through a
    /// `#[transactional]` repository).
    TenantObject,
    /// Yields to the runtime.
    Yield,
}

/// One request: a scope of a tenant and a user, on one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The instance (App) that serves it.
    pub instance: u8,
    /// Its tenant.
    pub tenant: u8,
    /// Its user.
    pub user: u8,
    /// What its handler runs.
    pub body: Vec<Op>,
    /// How its handler ends.
    pub end: End,
    /// Starts while the request before it still runs.
    pub overlap: bool,
}

/// Where a `COMMIT` is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CutAt {
    /// Before it reaches the server.
    BeforeSend,
    /// Applied by the server, its answer lost.
    AfterAnswer,
}

/// A fault, injected at a point of the scenario (requests counted from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// SQLite: another connection holds the write lock while the request runs, past the busy
    /// timeout.
    Busy {
        /// The request.
        request: u16,
    },
    /// PostgreSQL: the `nth` `COMMIT` of the scenario (1 is the first) is cut.
    CutCommit {
        /// Which `COMMIT`.
        nth: u16,
        /// Where.
        at: CutAt,
    },
    /// PostgreSQL: every connection of the pool is taken while the request runs.
    PoolExhausted {
        /// The request.
        request: u16,
    },
    /// The broker refuses everything from request `from` until request `to` has ended.
    BrokerDown {
        /// The first request.
        from: u16,
        /// The last request.
        to: u16,
    },
    /// The broker fails once, transiently, during the request.
    BrokerFails {
        /// The request.
        request: u16,
    },
    /// The broker restarts without its store during the request.
    BrokerRestart {
        /// The request.
        request: u16,
    },
    /// The process stops (its runtime dropped, nothing shut down; on some seeds its Apps
    /// dropped first, `run::apps_outlived`) while the request runs, then is built again on the
    /// same database.
    Stop {
        /// The request.
        request: u16,
        /// How many milliseconds into the request.
        after_ms: u8,
    },
}

/// A scenario: its seed, database, instances, requests and faults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// The seed it was generated from.
    pub seed: u64,
    /// The database.
    pub db: Db,
    /// How many instances (Apps) serve the requests: 1 or 2.
    pub instances: u8,
    /// The requests, in the order they start.
    pub requests: Vec<Request>,
    /// The faults.
    pub faults: Vec<Fault>,
}

impl Scenario {
    /// How many operations it has, nested ones included: what shrinking makes smaller.
    pub fn size(&self) -> usize {
        fn ops(body: &[Op]) -> usize {
            body.iter()
                .map(|op| {
                    1 + match op {
                        Op::Call { body, .. }
                        | Op::Retried { body, .. }
                        | Op::Spawn { body, .. }
                        | Op::ActAs { body, .. } => ops(body),
                        _ => 0,
                    }
                })
                .sum()
        }
        self.requests.iter().map(|r| 1 + ops(&r.body)).sum::<usize>() + self.faults.len()
    }

    /// Whether the scenario has an event carried by the outbox.
    pub fn has_external(&self) -> bool {
        fn any(body: &[Op]) -> bool {
            body.iter().any(|op| match op {
                Op::Emit(spec) => spec.external,
                Op::Call { body, .. } | Op::Retried { body, .. } | Op::Spawn { body, .. } | Op::ActAs { body, .. } => {
                    any(body)
                }
                _ => false,
            })
        }
        self.requests.iter().any(|r| any(&r.body))
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resolve = if self.db == Db::Postgres && crate::run::resolves_commits(self.seed) {
            " (resolve_commits on)"
        } else {
            ""
        };
        let outlived =
            if crate::run::apps_outlived(self.seed) && self.faults.iter().any(|f| matches!(f, Fault::Stop { .. })) {
                " (a stop drops the Apps before their runtime)"
            } else {
                ""
            };
        writeln!(f, "scenario seed {} on {:?}{resolve}{outlived}, {} instance(s)", self.seed, self.db, self.instances)?;
        for fault in &self.faults {
            writeln!(f, "  fault {fault:?}")?;
        }
        for (i, r) in self.requests.iter().enumerate() {
            let overlap = if r.overlap { ", overlapping the previous" } else { "" };
            writeln!(
                f,
                "  request {i} on instance {} as tenant t{} user u{}, ends {:?}{overlap}",
                r.instance, r.tenant, r.user, r.end
            )?;
            write_ops(f, &r.body, 2)?;
        }
        Ok(())
    }
}

fn write_ops(f: &mut fmt::Formatter<'_>, body: &[Op], depth: usize) -> fmt::Result {
    for op in body {
        let pad = "  ".repeat(depth);
        match op {
            Op::Call { prop, body, end, caught } => {
                let caught = if *caught { ", caught" } else { "" };
                writeln!(f, "{pad}call {prop:?}, ends {end:?}{caught}")?;
                write_ops(f, body, depth + 1)?;
            }
            Op::Retried { body, conflicts, end, caught } => {
                let caught = if *caught { ", caught" } else { "" };
                writeln!(f, "{pad}call RequiresNew retried, {conflicts} conflict(s), then ends {end:?}{caught}")?;
                write_ops(f, body, depth + 1)?;
            }
            Op::Spawn { body, detached } => {
                writeln!(f, "{pad}spawn{}", if *detached { ", detached" } else { ", awaited" })?;
                write_ops(f, body, depth + 1)?;
            }
            Op::ActAs { user, tenant, body } => {
                let tenant = tenant.map(|t| format!(" tenant t{t}")).unwrap_or_default();
                writeln!(f, "{pad}act as user u{user}{tenant}")?;
                write_ops(f, body, depth + 1)?;
            }
            Op::Emit(spec) => {
                let kind = if spec.external { "external" } else { "local" };
                writeln!(
                    f,
                    "{pad}emit {kind} (before_commit {:?}, after_commit {:?}, after_rollback {:?})",
                    spec.before_commit, spec.after_commit, spec.after_rollback
                )?;
            }
            Op::Bad { caught } => writeln!(f, "{pad}bad statement{}", if *caught { ", caught" } else { "" })?,
            other => writeln!(f, "{pad}{}", format!("{other:?}").to_lowercase())?,
        }
    }
    Ok(())
}
