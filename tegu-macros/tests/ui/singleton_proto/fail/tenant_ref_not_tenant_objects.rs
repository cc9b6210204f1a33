//! `TenantRef<F>` needs `F: TenantObjects`: the error points at `F` and says what to implement.
use tegu_core::{singleton_proto, tenant::TenantRef};

#[singleton_proto]
pub struct Settings;

#[singleton_proto]
pub struct Service {
    #[inject]
    dbs: TenantRef<Settings>,
}

fn main() {}
