//! The tenant cache under a soak: 10,000 tenants cycling through a cache of 1,000 under 1,000
//! concurrent requests, in bursts, for `DI_TENANT_SOAK_SECS` seconds (10 by default; the
//! results page quotes a minute's run). No request ever sees another tenant's object or two
//! objects in one request, the cache is back at its bound after every burst, and by the end
//! of shutdown every object built (evicted or still cached) is destroyed exactly once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tegu_core::{
    App, ProtoDef,
    error::BoxError,
    registry::{Dependency, InjectKind},
    tenant::{Tenant, TenantObjects, TenantRef},
};

const TENANTS: u64 = 10_000;
const CACHED: usize = 1_000;
const REQUESTS: usize = 1_000;

/// A tenant's object: whose it is, and which build of all.
#[derive(Debug)]
struct Conn {
    tenant: String,
    build: u64,
}

/// Builds one `Conn` per tenant while cached, records every build and every destroy.
#[derive(Default)]
struct Conns {
    builds: AtomicU64,
    destroyed: Mutex<HashMap<u64, usize>>,
    wrong_destroys: AtomicUsize,
}

impl TenantObjects for Conns {
    type Object = Conn;
    const MAX_TENANTS: usize = CACHED;

    async fn create(&self, tenant: &Tenant) -> Result<Conn, BoxError> {
        tokio::task::yield_now().await; // reads of a tenant being built overlap here
        Ok(Conn { tenant: tenant.key().to_owned(), build: self.builds.fetch_add(1, Ordering::Relaxed) })
    }

    async fn destroy(&self, tenant: &Tenant, conn: Arc<Conn>) -> Result<(), BoxError> {
        if tenant.key() != conn.tenant {
            self.wrong_destroys.fetch_add(1, Ordering::Relaxed);
        }
        *self.destroyed.lock().unwrap().entry(conn.build).or_default() += 1;
        Ok(())
    }
}

struct Service {
    conns: Arc<TenantRef<Conns>>,
}

/// A cheap generator of tenant numbers, different per request.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % TENANTS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tenants_cycle_through_a_cache_of_a_thousand_under_a_thousand_requests() {
    let seconds = std::env::var("DI_TENANT_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Conns>(|_| Ok(Conns::default())))
        .register(
            ProtoDef::singleton::<Service>(|r| Ok(Service { conns: r.arc(0)? }))
                .dep(Dependency::new::<TenantRef<Conns>>(InjectKind::Arc, None))
                .also(ProtoDef::tenants::<Conns>),
        )
        .stop_timeout(Duration::from_secs(60))
        .build()
        .await
        .unwrap();
    let service = app.get_object::<Service>().unwrap();
    let mixups = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let (mut bursts, mut reads, mut largest) = (0u64, 0u64, 0usize);
    while began.elapsed() < Duration::from_secs(seconds) {
        // A burst: every request reads its tenant's object twice, across an await.
        let requests: Vec<_> = (0..REQUESTS)
            .map(|r| {
                let (app, service, mixups) = (app.clone(), Arc::clone(&service), Arc::clone(&mixups));
                let mut state = (bursts + 1) * 1_000_003 + r as u64 * 7_919 + 1;
                tokio::spawn(async move {
                    let key = format!("t{}", next(&mut state));
                    let scope = app.scope().tenant(key.as_str()).unwrap();
                    scope
                        .run(async {
                            let first = service.conns.get().await.unwrap();
                            tokio::task::yield_now().await;
                            let second = service.conns.get().await.unwrap();
                            if first.tenant != key || !Arc::ptr_eq(&first, &second) {
                                mixups.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                        .await;
                })
            })
            .collect();
        for request in requests {
            request.await.unwrap();
        }
        bursts += 1;
        reads += REQUESTS as u64 * 2;
        // Every build of the burst has ended: the cache is at its bound.
        let cached = service.conns.cached();
        largest = largest.max(cached);
        assert!(cached <= CACHED, "after burst {bursts} the cache holds {cached}, more than {CACHED}");
    }
    let conns = app.get_object::<Conns>().unwrap();
    let built = conns.builds.load(Ordering::Relaxed);
    app.shutdown().await.unwrap();
    let destroyed = conns.destroyed.lock().unwrap().clone();
    let twice = destroyed.values().filter(|&&n| n != 1).count();
    let missing = (0..built).filter(|b| !destroyed.contains_key(b)).count();
    println!(
        "tenant soak: {seconds} s, {bursts} bursts of {REQUESTS} concurrent requests over {TENANTS} tenants, {reads} reads; \
         {built} objects built, the cache at most {largest} of {CACHED} after a burst; \
         {} destroyed ({missing} never, {twice} more than once), {} mix-ups",
        destroyed.len(),
        mixups.load(Ordering::Relaxed)
    );
    assert_eq!(mixups.load(Ordering::Relaxed), 0, "a request saw another tenant's object, or two");
    assert_eq!(conns.wrong_destroys.load(Ordering::Relaxed), 0, "a destroy hook got another tenant's object");
    assert_eq!((missing, twice), (0, 0), "every object built is destroyed exactly once");
    assert_eq!(destroyed.len() as u64, built);
    assert!(built > TENANTS, "the tenants cycled through the cache");
}
