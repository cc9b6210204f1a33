//! Scenarios from a seed: a small generator of its own (SplitMix64) and weights fixed in this
//! file. The same seed gives the same scenario for as long as this file does not change: a
//! change of the weights is a change of what every seed means, made in a commit of its own.

use crate::scenario::{Behave, CutAt, Db, End, EventSpec, Fault, Op, Prop, Request, Scenario};

/// SplitMix64: a seeded sequence of 64-bit numbers, enough for choosing among weights.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The sequence of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `true` with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `choices`, by weight.
    pub fn pick<T: Copy>(&mut self, choices: &[(u32, T)]) -> T {
        let total: u64 = choices.iter().map(|(w, _)| u64::from(*w)).sum();
        let mut at = self.below(total);
        for (weight, choice) in choices {
            if at < u64::from(*weight) {
                return *choice;
            }
            at -= u64::from(*weight);
        }
        choices[choices.len() - 1].1
    }
}

/// The kinds of operations, for the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Read,
    Bad,
    Emit,
    Call,
    Retried,
    Spawn,
    ActAs,
    TenantObject,
    Yield,
}

/// The weights of the operations in a request's handler.
const TOP: &[(u32, Kind)] = &[
    (38, Kind::Call),
    (6, Kind::Retried),
    (8, Kind::Write),
    (10, Kind::Emit),
    (4, Kind::Read),
    (3, Kind::Bad),
    (10, Kind::Spawn),
    (6, Kind::ActAs),
    (4, Kind::TenantObject),
    (8, Kind::Yield),
];

/// The weights of the operations inside a method, a task or a nested scope.
const INNER: &[(u32, Kind)] = &[
    (18, Kind::Call),
    (4, Kind::Retried),
    (20, Kind::Write),
    (16, Kind::Emit),
    (4, Kind::Read),
    (6, Kind::Bad),
    (6, Kind::Spawn),
    (6, Kind::ActAs),
    (3, Kind::TenantObject),
    (12, Kind::Yield),
];

const PROPS: &[(u32, Prop)] =
    &[(40, Prop::Required), (15, Prop::RequiresNew), (25, Prop::Nested), (10, Prop::Mandatory), (10, Prop::Never)];

/// How methods end.
const METHOD_ENDS: &[(u32, End)] = &[(84, End::Ok), (11, End::Err), (5, End::Panic)];

/// How requests' handlers end.
const REQUEST_ENDS: &[(u32, End)] = &[(88, End::Ok), (8, End::Err), (4, End::Panic)];

const BEHAVES: &[(u32, Behave)] = &[(90, Behave::Ok), (7, Behave::Fail), (3, Behave::Panic)];

/// The deepest nesting of calls, tasks and nested scopes.
const MAX_DEPTH: u32 = 3;

/// The scenario of `seed` on `db`.
pub fn scenario(seed: u64, db: Db) -> Scenario {
    let mut rng = Rng::new(seed);
    let instances = if rng.chance(50) { 2 } else { 1 };
    let count = 1 + rng.below(if db == Db::Sqlite { 6 } else { 5 }) as usize;
    let requests = (0..count)
        .map(|_| {
            let ops = rng.below(5) as usize;
            Request {
                instance: rng.below(u64::from(instances)) as u8,
                tenant: rng.below(3) as u8,
                user: rng.below(3) as u8,
                body: (0..ops).map(|_| op(&mut rng, TOP, 0)).collect(),
                end: rng.pick(REQUEST_ENDS),
                overlap: rng.chance(25),
            }
        })
        .collect::<Vec<_>>();
    let faults = faults(&mut rng, db, requests.len() as u16);
    Scenario { seed, db, instances, requests, faults }
}

fn op(rng: &mut Rng, weights: &[(u32, Kind)], depth: u32) -> Op {
    let mut kind = rng.pick(weights);
    if depth >= MAX_DEPTH && matches!(kind, Kind::Call | Kind::Retried | Kind::Spawn | Kind::ActAs) {
        kind = Kind::Write;
    }
    match kind {
        Kind::Write => Op::Write,
        Kind::Read => Op::Read,
        Kind::Bad => Op::Bad { caught: rng.chance(50) },
        Kind::Emit => Op::Emit(EventSpec {
            external: rng.chance(40),
            before_commit: rng.pick(BEHAVES),
            after_commit: rng.pick(BEHAVES),
            after_rollback: rng.pick(BEHAVES),
        }),
        Kind::Call => Op::Call {
            prop: rng.pick(PROPS),
            body: body(rng, depth + 1, 4),
            end: rng.pick(METHOD_ENDS),
            caught: rng.chance(45),
        },
        Kind::Retried => Op::Retried {
            body: body(rng, depth + 1, 3),
            conflicts: rng.pick(&[(20, 0), (40, 1), (25, 2), (15, 3)]),
            end: rng.pick(METHOD_ENDS),
            caught: rng.chance(45),
        },
        Kind::Spawn => {
            // A task usually calls a method: what joins the request's transaction from another task.
            let body = if rng.chance(75) {
                let mut inner = Vec::new();
                if rng.chance(50) {
                    inner.push(Op::Yield);
                }
                inner.extend(body(rng, depth + 2, 3));
                vec![Op::Call {
                    prop: rng.pick(&[(70, Prop::Required), (15, Prop::Nested), (15, Prop::RequiresNew)]),
                    body: inner,
                    end: rng.pick(METHOD_ENDS),
                    caught: false,
                }]
            } else {
                body(rng, depth + 1, 3)
            };
            Op::Spawn { body, detached: rng.chance(50) }
        }
        Kind::ActAs => Op::ActAs {
            user: rng.below(3) as u8,
            tenant: if rng.chance(30) { Some(rng.below(3) as u8) } else { None },
            body: body(rng, depth + 1, 3),
        },
        Kind::TenantObject => Op::TenantObject,
        Kind::Yield => Op::Yield,
    }
}

fn body(rng: &mut Rng, depth: u32, most: u64) -> Vec<Op> {
    let n = rng.below(most + 1) as usize;
    (0..n).map(|_| op(rng, INNER, depth)).collect()
}

fn faults(rng: &mut Rng, db: Db, requests: u16) -> Vec<Fault> {
    let mut faults = Vec::new();
    let count = rng.pick(&[(45, 0usize), (40, 1), (15, 2)]);
    for _ in 0..count {
        let request = rng.below(u64::from(requests)) as u16;
        let (span, nth, after_ms) = (rng.below(2) as u16, 1 + rng.below(3) as u16, rng.below(20) as u8);
        let fault = match db {
            Db::Sqlite => rng.pick(&[
                (25, Fault::Busy { request }),
                (15, Fault::BrokerDown { from: request, to: request.saturating_add(span) }),
                (20, Fault::BrokerFails { request }),
                (15, Fault::BrokerRestart { request }),
                (25, Fault::Stop { request, after_ms }),
            ]),
            Db::Postgres => rng.pick(&[
                (20, Fault::CutCommit { nth, at: CutAt::BeforeSend }),
                (25, Fault::CutCommit { nth, at: CutAt::AfterAnswer }),
                (15, Fault::PoolExhausted { request }),
                (15, Fault::BrokerDown { from: request, to: request.saturating_add(span) }),
                (10, Fault::BrokerFails { request }),
                (15, Fault::Stop { request, after_ms }),
            ]),
        };
        faults.push(fault);
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_scenario_each_time() {
        for seed in 0..200 {
            assert_eq!(scenario(seed, Db::Sqlite), scenario(seed, Db::Sqlite));
        }
    }

    #[test]
    fn the_weights_reach_every_operation_and_fault() {
        let all: Vec<Scenario> =
            (0..2000).map(|s| scenario(s, if s % 2 == 0 { Db::Sqlite } else { Db::Postgres })).collect();
        let text = format!("{all:?}");
        for needle in [
            "Write",
            "Read",
            "Bad",
            "Emit",
            "RequiresNew",
            "Nested",
            "Mandatory",
            "Never",
            "Spawn",
            "ActAs",
            "TenantObject",
            "Yield",
            "Busy",
            "CutCommit",
            "PoolExhausted",
            "BrokerDown",
            "BrokerFails",
            "BrokerRestart",
            "Stop",
            "BeforeSend",
            "AfterAnswer",
        ] {
            assert!(text.contains(needle), "no scenario has {needle}");
        }
    }
}
