//! What the fabric crate's test binaries share: a domain of a real provider, opened as the
//! binaries ask for it.

use onesided_fabric::{Domain, MrMode, Provider, Request};
use std::sync::Arc;

/// A domain of `provider` in `mr_mode`, registering local buffers where the mode is the verbs
/// one (`FI_MR_LOCAL`).
pub fn domain(provider: &str, mr_mode: MrMode) -> Arc<Domain> {
    let req = Request {
        provider: Some(provider.into()),
        mr_mode,
        register_local: mr_mode == MrMode::VERBS,
        ..Request::default()
    };
    let p = Provider::find(&req).unwrap_or_else(|e| panic!("{provider}: {e}"));
    Domain::open(p).unwrap()
}
