//! The verbs devices of this machine as `ibv_devinfo -v` shows them, with the inline size of
//! their queue pairs probed (which needs queue pairs, so it sits above the device and queue
//! modules).

use crate::device::{Context, DeviceInfo, device_names};
use crate::error::VerbsError;
use crate::library::library;
use crate::queue::{Cq, Pd, Qp};
use std::sync::Arc;

/// The verbs devices of this machine (none where libibverbs loads but finds no device); an error
/// where libibverbs cannot be loaded.
pub fn devices() -> Result<Vec<DeviceInfo>, VerbsError> {
    let lib = library()?;
    let mut out = Vec::new();
    for name in device_names(lib)? {
        let ctx = Context::open(&name)?;
        let mut info = ctx.describe()?;
        info.max_inline = probe_inline(&ctx).unwrap_or(0);
        out.push(info);
    }
    Ok(out)
}

/// The largest inline payload of a queue pair on `ctx` (what `ibv_devinfo` does not tell):
/// a throwaway queue pair is created asking for 1 KiB, then half as much until it is granted.
fn probe_inline(ctx: &Context) -> Result<u32, VerbsError> {
    let ctx = Arc::new(Context::open(&ctx.name)?);
    let pd = Pd::alloc(ctx.clone())?;
    let cq = Cq::create(ctx, 2, None)?;
    let qp = Qp::create(pd, &cq, &cq, 1, None, 1024)?;
    Ok(qp.max_inline)
}
