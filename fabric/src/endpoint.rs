//! An RDM endpoint with its address vector, completion counter and completion queue; RMA and
//! atomics that return when their local buffers may be reused; remote completion by counter.

use crate::domain::{AtomicKind, AtomicOp, Datatype, Domain, close};
use crate::error::{FiError, check};
use crate::info::MrMode;
use crate::region::{Access, Region, RegionKey};
use crate::sys;
use onesided_shm::Mem;
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of the registered bounce buffer used for small transfers and atomic operands when
/// the provider demands registered local buffers (`FI_MR_LOCAL`).
const BOUNCE: usize = 64 << 10;
/// Offsets in the bounce buffer of atomic operand, compare value and result.
const OPERAND: usize = 0;
const COMPARE: usize = 64;
const RESULT: usize = 128;
/// How long the progress thread blocks in one `fi_cq_sread` before it looks again at its stop
/// flag and at the owner's activity.
const PROGRESS_WAIT_MS: i32 = 1;
/// The progress thread stands aside while the owning thread has driven the endpoint this
/// recently: two threads polling one endpoint contend for its lock and wake each other, which
/// doubled the latency of put + flush over tcp;ofi_rxm (12 us alone, 25 us with both).
const HOLDOFF: Duration = Duration::from_micros(200);
/// How often a waiter asks its caller whether to keep waiting.
const CHECK_EVERY: Duration = Duration::from_millis(10);

/// A peer's address in this endpoint's address vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(u64);

/// The libfabric objects of an endpoint, closed when the endpoint and every region bound to it
/// are gone.
pub(crate) struct Core {
    domain: Arc<Domain>,
    ep: *mut sys::fid_ep,
    av: *mut sys::fid_av,
    cq: *mut sys::fid_cq,
    cntr: *mut sys::fid_cntr,
    /// The completion queue has a wait object (`fi_cq_sread` blocks).
    waitable: bool,
    /// Text of the last error completion, read by whichever thread found it.
    last_error: Mutex<Option<String>>,
    /// When the owning thread last issued or waited for an operation (nanoseconds since
    /// `epoch`).
    active: AtomicU64,
    epoch: Instant,
}

// SAFETY: the domain is FI_THREAD_SAFE, so these objects may be used from any thread.
unsafe impl Send for Core {}
// SAFETY: as above.
unsafe impl Sync for Core {}

impl Core {
    /// Note that the owning thread is driving the endpoint now.
    fn touch(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.active.store(now, Ordering::Relaxed);
    }

    /// How long ago the owning thread last drove the endpoint.
    fn idle(&self) -> Duration {
        let now = self.epoch.elapsed().as_nanos() as u64;
        Duration::from_nanos(now.saturating_sub(self.active.load(Ordering::Relaxed)))
    }

    /// One round of the progress thread: stand aside while the owner is active, else block
    /// until traffic arrives (or a short timeout), serving the target side meanwhile.
    fn serve(&self) {
        let idle = self.idle();
        if idle < HOLDOFF {
            std::thread::sleep(HOLDOFF - idle);
        } else {
            self.wait();
        }
    }

    pub(crate) fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub(crate) fn ep(&self) -> *mut sys::fid_ep {
        self.ep
    }

    /// Drive the provider (reading the completion queue progresses the endpoint) and keep the
    /// text of any error completion.
    fn poll(&self) {
        let mut entry = sys::fi_cq_entry::default();
        // SAFETY: the queue is open; `entry` has room for one FI_CQ_FORMAT_CONTEXT entry.
        let ret = unsafe { sys::fi_cq_read(self.cq, (&raw mut entry).cast(), 1) };
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
        }
    }

    /// Block until traffic arrives or `PROGRESS_WAIT_MS` passes, progressing meanwhile.
    fn wait(&self) {
        if !self.waitable {
            self.poll();
            std::thread::sleep(HOLDOFF);
            return;
        }
        let mut entry = sys::fi_cq_entry::default();
        // SAFETY: as in `poll`; the condition argument may be NULL.
        let ret = unsafe {
            sys::fi_cq_sread(
                self.cq,
                (&raw mut entry).cast(),
                1,
                ptr::null(),
                PROGRESS_WAIT_MS,
            )
        };
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
        }
    }

    fn read_error(&self) {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: the queue is open; `err` is a valid out-parameter with no provider buffer.
        let ret = unsafe { sys::fi_cq_readerr(self.cq, &mut err, 0) };
        if ret <= 0 {
            return;
        }
        let mut buf = [0 as libc::c_char; 256];
        // SAFETY: the queue is open; `err` was filled by fi_cq_readerr; `buf` has the length
        // given, and fi_cq_strerror returns a NUL-terminated string.
        let text = unsafe {
            let s = sys::fi_cq_strerror(
                self.cq,
                err.prov_errno,
                err.err_data,
                buf.as_mut_ptr(),
                buf.len(),
            );
            std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
        };
        let text = format!(
            "{} ({}; provider errno {})",
            FiError::new("completion", err.err as i64).text(),
            err.err,
            text
        );
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }

    fn take_error(&self) -> String {
        self.poll();
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| "an operation failed".into())
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // SAFETY: nothing uses these objects any more (the progress thread has been joined and
        // every region holding this core is gone); the endpoint closes before what it is bound
        // to.
        unsafe {
            close(self.ep.cast());
            close(self.cq.cast());
            close(self.cntr.cast());
            close(self.av.cast());
        }
    }
}

/// The progress thread's handle on the core.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// An RDM endpoint, ready for RMA and atomics to the peers inserted into it.
pub struct Endpoint {
    core: Arc<Core>,
    progress: Progress,
    bounce: Region<'static>,
    local_mr: bool,
    inject: usize,
    delivery: u64,
    max_msg: usize,
    issued: Cell<u64>,
    errors_seen: Cell<u64>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", self.core.domain.provider())
            .field("issued", &self.issued.get())
            .finish()
    }
}

/// A pointer that may be sent to the progress thread.
struct SendCore(Arc<Core>);

impl Endpoint {
    /// Open an endpoint on `domain`, bind an address vector, a completion counter and a
    /// completion queue (errors only), enable it, and start its progress thread.
    pub fn open(domain: &Arc<Domain>) -> Result<Endpoint, FiError> {
        let info = domain.provider().raw();
        let mut core = Core {
            domain: domain.clone(),
            ep: ptr::null_mut(),
            av: ptr::null_mut(),
            cq: ptr::null_mut(),
            cntr: ptr::null_mut(),
            waitable: true,
            last_error: Mutex::new(None),
            active: AtomicU64::new(0),
            epoch: Instant::now(),
        };
        // SAFETY: the domain is open and `info` is its provider's fi_info; each out-pointer is
        // closed by Core's Drop, also when a later step fails.
        unsafe {
            check(
                "fi_endpoint",
                sys::fi_endpoint(domain.raw(), info, &mut core.ep, ptr::null_mut()),
            )?;
            let mut av_attr = sys::fi_av_attr {
                type_: sys::fi_av_type_FI_AV_UNSPEC,
                ..Default::default()
            };
            check(
                "fi_av_open",
                sys::fi_av_open(domain.raw(), &mut av_attr, &mut core.av, ptr::null_mut()),
            )?;
            let mut cq_attr = sys::fi_cq_attr {
                format: sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT,
                wait_obj: sys::fi_wait_obj_FI_WAIT_UNSPEC,
                ..Default::default()
            };
            if sys::fi_cq_open(domain.raw(), &mut cq_attr, &mut core.cq, ptr::null_mut()) != 0 {
                cq_attr.wait_obj = sys::fi_wait_obj_FI_WAIT_NONE;
                core.waitable = false;
                check(
                    "fi_cq_open",
                    sys::fi_cq_open(domain.raw(), &mut cq_attr, &mut core.cq, ptr::null_mut()),
                )?;
            }
            let mut cntr_attr = sys::fi_cntr_attr {
                events: sys::fi_cntr_events_FI_CNTR_EVENTS_COMP,
                wait_obj: sys::fi_wait_obj_FI_WAIT_NONE,
                ..Default::default()
            };
            check(
                "fi_cntr_open",
                sys::fi_cntr_open(
                    domain.raw(),
                    &mut cntr_attr,
                    &mut core.cntr,
                    ptr::null_mut(),
                ),
            )?;
            check(
                "fi_ep_bind(av)",
                sys::fi_ep_bind(core.ep, &mut (*core.av).fid, 0),
            )?;
            let cq_flags =
                sys::FI_TRANSMIT as u64 | sys::FI_RECV as u64 | sys::FI_SELECTIVE_COMPLETION as u64;
            check(
                "fi_ep_bind(cq)",
                sys::fi_ep_bind(core.ep, &mut (*core.cq).fid, cq_flags),
            )?;
            let cntr_flags = sys::FI_WRITE as u64 | sys::FI_READ as u64;
            check(
                "fi_ep_bind(cntr)",
                sys::fi_ep_bind(core.ep, &mut (*core.cntr).fid, cntr_flags),
            )?;
            check("fi_enable", sys::fi_enable(core.ep))?;
        }
        let core = Arc::new(core);
        let p = domain.provider();
        let bounce_mem = Mem::alloc(BOUNCE, 4096)
            .ok_or_else(|| FiError::new("bounce buffer", -(libc::ENOMEM as i64)))?;
        let bounce = Region::new(&core, bounce_mem, Access::Local)?;
        let stop = Arc::new(AtomicBool::new(false));
        let progress = {
            let (stop, c) = (stop.clone(), SendCore(core.clone()));
            std::thread::Builder::new()
                .name("onesided-progress".into())
                .spawn(move || {
                    let c = c;
                    while !stop.load(Ordering::Acquire) {
                        c.0.serve();
                    }
                })
                .map_err(|e| {
                    FiError::new(
                        "progress thread",
                        -(e.raw_os_error().unwrap_or(libc::EAGAIN) as i64),
                    )
                })?
        };
        Ok(Endpoint {
            local_mr: p.mr_mode().contains(MrMode::LOCAL),
            inject: p.inject_size(),
            delivery: if p.delivery_complete() {
                sys::FI_DELIVERY_COMPLETE as u64
            } else {
                0
            },
            max_msg: p.max_msg_size().max(1),
            core,
            progress: Progress {
                stop,
                thread: Some(progress),
            },
            bounce,
            issued: Cell::new(0),
            errors_seen: Cell::new(0),
        })
    }

    /// The domain this endpoint was opened on.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.core.domain
    }

    /// This endpoint's address, for peers to insert.
    pub fn name(&self) -> Result<Vec<u8>, FiError> {
        let mut buf = vec![0u8; 256];
        loop {
            let mut len = buf.len();
            // SAFETY: the endpoint is open; `buf` has `len` writable bytes.
            let ret = unsafe {
                sys::fi_getname(&mut (*self.core.ep).fid, buf.as_mut_ptr().cast(), &mut len)
            };
            if ret == -(sys::FI_ETOOSMALL as i32) && len > buf.len() {
                buf.resize(len, 0);
                continue;
            }
            check("fi_getname", ret)?;
            buf.truncate(len);
            return Ok(buf);
        }
    }

    /// Insert a peer's address (from its [`Endpoint::name`]).
    pub fn insert(&self, name: &[u8]) -> Result<Peer, FiError> {
        let mut addr: sys::fi_addr_t = 0;
        // SAFETY: the address vector is open; `name` holds one address of this provider's
        // format (the provider validates it); `addr` receives one fi_addr_t.
        let ret = unsafe {
            sys::fi_av_insert(
                self.core.av,
                name.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        if check("fi_av_insert", ret)? != 1 {
            return Err(FiError::new("fi_av_insert", -(sys::FI_EINVAL as i64)));
        }
        Ok(Peer(addr))
    }

    /// Register memory for the life of `'a` so that peers can reach it.
    pub fn register<'a>(&self, mem: Mem<'a>) -> Result<Region<'a>, FiError> {
        Region::new(&self.core, mem, Access::Remote)
    }

    /// The key to use in operations on a peer's region described by `key` (maps raw keys).
    pub fn map_key(&self, key: &RegionKey) -> Result<u64, FiError> {
        if !key.raw {
            let bytes: [u8; 8] = key
                .key
                .as_slice()
                .try_into()
                .map_err(|_| FiError::new("remote key", -(sys::FI_EINVAL as i64)))?;
            return Ok(u64::from_le_bytes(bytes));
        }
        let mut out = 0u64;
        let mut raw = key.key.clone();
        // SAFETY: the domain is open; `raw` holds the key bytes a peer's fi_mr_raw_attr gave.
        check("fi_mr_map_raw", unsafe {
            sys::fi_mr_map_raw(
                self.core.domain.raw(),
                key.base,
                raw.as_mut_ptr(),
                raw.len(),
                &mut out,
                0,
            )
        })?;
        Ok(out)
    }

    /// Issue one operation, progressing and retrying while the provider says FI_EAGAIN.
    fn post(&self, op: &str, mut call: impl FnMut() -> isize) -> Result<(), FiError> {
        self.core.touch();
        loop {
            let ret = call();
            if ret == -(sys::FI_EAGAIN as isize) {
                self.core.poll();
                continue;
            }
            check(op, ret as i64)?;
            self.issued.set(self.issued.get() + 1);
            return Ok(());
        }
    }

    /// Wait until every operation issued so far has completed (delivered at its target when
    /// the provider gives FI_DELIVERY_COMPLETE). `keep_waiting` is asked every few milliseconds
    /// and ends the wait with an error when it says no (a peer known to be dead).
    pub fn complete(&self, keep_waiting: &dyn Fn() -> bool) -> Result<(), FiError> {
        let want = self.issued.get();
        self.core.touch();
        let mut checked = Instant::now();
        let mut spins = 0u32;
        loop {
            // SAFETY: the counter is open.
            let (done, errs) = unsafe {
                (
                    sys::fi_cntr_read(self.core.cntr),
                    sys::fi_cntr_readerr(self.core.cntr),
                )
            };
            if errs > self.errors_seen.get() {
                self.errors_seen.set(errs);
                // Failed operations count as finished: forget them so later waits can end.
                return Err(FiError::with_detail(
                    "operation",
                    sys::FI_EIO as i32,
                    self.core.take_error(),
                ));
            }
            if done + errs >= want {
                self.core.touch();
                return Ok(());
            }
            self.core.poll();
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            }
            if checked.elapsed() >= CHECK_EVERY {
                if !keep_waiting() {
                    return Err(FiError::with_detail(
                        "operation",
                        sys::FI_ETIMEDOUT as i32,
                        "the target is gone".into(),
                    ));
                }
                checked = Instant::now();
            }
        }
    }

    /// Let the provider move pending work (the caller is driving the endpoint: the progress
    /// thread stands aside meanwhile).
    pub fn progress(&self) {
        self.core.touch();
        self.core.poll();
    }

    /// The largest piece one operation moves: the bounce buffer when local buffers must be
    /// registered, else the provider's limit.
    fn step(&self) -> usize {
        if self.local_mr {
            BOUNCE.min(self.max_msg)
        } else {
            self.max_msg
        }
    }

    fn bounce_desc(&self) -> *mut libc::c_void {
        if self.local_mr {
            self.bounce.desc()
        } else {
            ptr::null_mut()
        }
    }

    /// Write `src` to `addr` (in the peer's addressing) under `key`; returns when `src` may be
    /// reused. Small writes are injected; others wait for their completion.
    pub fn write(
        &self,
        src: &[u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> bool,
    ) -> Result<(), FiError> {
        let step = self.step();
        for (i, chunk) in src.chunks(step).enumerate() {
            let at = addr + (i * step) as u64;
            if chunk.len() <= self.inject {
                self.rma_msg(
                    "fi_writemsg",
                    chunk.as_ptr() as usize,
                    chunk.len(),
                    ptr::null_mut(),
                    peer,
                    at,
                    key,
                    sys::FI_INJECT as u64,
                )?;
                continue;
            }
            let (buf, desc) = if self.local_mr {
                self.bounce
                    .mem()
                    .write(0, chunk)
                    .map_err(|_| FiError::new("bounce", -(sys::FI_EINVAL as i64)))?;
                (self.bounce.mem().addr(), self.bounce.desc())
            } else {
                (chunk.as_ptr() as usize, ptr::null_mut())
            };
            self.rma_msg("fi_writemsg", buf, chunk.len(), desc, peer, at, key, 0)?;
            self.complete(keep_waiting)?;
        }
        Ok(())
    }

    /// Read `dst.len()` bytes at `addr` under `key`; returns with the data in `dst`.
    pub fn read(
        &self,
        dst: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> bool,
    ) -> Result<(), FiError> {
        let step = self.step();
        for (i, chunk) in dst.chunks_mut(step).enumerate() {
            let at = addr + (i * step) as u64;
            if self.local_mr {
                let b = self.bounce.mem();
                self.rma_read(b.addr(), chunk.len(), self.bounce.desc(), peer, at, key)?;
                self.complete(keep_waiting)?;
                b.read(0, chunk)
                    .map_err(|_| FiError::new("bounce", -(sys::FI_EINVAL as i64)))?;
            } else {
                self.rma_read(
                    chunk.as_mut_ptr() as usize,
                    chunk.len(),
                    ptr::null_mut(),
                    peer,
                    at,
                    key,
                )?;
                self.complete(keep_waiting)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rma_msg(
        &self,
        op: &str,
        buf: usize,
        len: usize,
        mut desc: *mut libc::c_void,
        peer: Peer,
        addr: u64,
        key: u64,
        flags: u64,
    ) -> Result<(), FiError> {
        let mut iov = libc::iovec {
            iov_base: buf as *mut libc::c_void,
            iov_len: len,
        };
        let mut rma = sys::fi_rma_iov { addr, len, key };
        let msg = sys::fi_msg_rma {
            msg_iov: (&raw mut iov).cast(),
            desc: &mut desc,
            iov_count: 1,
            addr: peer.0,
            rma_iov: &mut rma,
            rma_iov_count: 1,
            context: ptr::null_mut(),
            data: 0,
        };
        // SAFETY: the endpoint is open; `buf` is valid for `len` bytes until the call returns
        // (FI_INJECT copies it) or until the caller waits for completion before releasing it;
        // `msg` and what it points to live across the call.
        self.post(op, || unsafe {
            sys::fi_writemsg(self.core.ep, &msg, flags | self.delivery)
        })
    }

    fn rma_read(
        &self,
        buf: usize,
        len: usize,
        desc: *mut libc::c_void,
        peer: Peer,
        addr: u64,
        key: u64,
    ) -> Result<(), FiError> {
        // SAFETY: the endpoint is open; `buf` is writable for `len` bytes and the caller waits
        // for completion before using or releasing it.
        self.post("fi_read", || unsafe {
            sys::fi_read(
                self.core.ep,
                buf as *mut libc::c_void,
                len,
                desc,
                peer.0,
                addr,
                key,
                ptr::null_mut(),
            )
        })
    }

    /// `op` on one `dtype` element at `addr` with `operand` (its bytes); returns the old value's
    /// bytes in `result` when given (`fi_fetch_atomic`), else applies it (`fi_atomic`).
    #[allow(clippy::too_many_arguments)]
    pub fn atomic(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operand: &[u8],
        result: Option<&mut [u8]>,
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> bool,
    ) -> Result<(), FiError> {
        let size = dtype.size();
        let b = self.bounce.mem();
        let bad = |_| FiError::new("atomic operand", -(sys::FI_EINVAL as i64));
        b.write(OPERAND, &operand[..size.min(operand.len())])
            .map_err(bad)?;
        let (buf, desc) = (b.addr() + OPERAND, self.bounce_desc());
        match result {
            Some(out) => {
                // SAFETY: the endpoint is open; operand and result lie in the registered bounce
                // buffer, which is not reused before completion (waited for below).
                self.post("fi_fetch_atomic", || unsafe {
                    sys::fi_fetch_atomic(
                        self.core.ep,
                        buf as *const libc::c_void,
                        1,
                        desc,
                        (b.addr() + RESULT) as *mut libc::c_void,
                        desc,
                        peer.0,
                        addr,
                        key,
                        dtype.raw(),
                        op.raw(),
                        ptr::null_mut(),
                    )
                })?;
                self.complete(keep_waiting)?;
                b.read(RESULT, &mut out[..size]).map_err(bad)
            }
            None => {
                // SAFETY: as above; the operand is in the bounce buffer and the call waits for
                // completion before the buffer is reused.
                self.post("fi_atomic", || unsafe {
                    sys::fi_atomic(
                        self.core.ep,
                        buf as *const libc::c_void,
                        1,
                        desc,
                        peer.0,
                        addr,
                        key,
                        dtype.raw(),
                        op.raw(),
                        ptr::null_mut(),
                    )
                })?;
                self.complete(keep_waiting)
            }
        }
    }

    /// Compare-and-swap one `dtype` element at `addr`: stores `swap` if it equals `compare`;
    /// the old value's bytes go to `result`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_swap(
        &self,
        dtype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> bool,
    ) -> Result<(), FiError> {
        let size = dtype.size();
        let b = self.bounce.mem();
        let bad = |_| FiError::new("atomic operand", -(sys::FI_EINVAL as i64));
        b.write(OPERAND, &swap[..size]).map_err(bad)?;
        b.write(COMPARE, &compare[..size]).map_err(bad)?;
        let desc = self.bounce_desc();
        // SAFETY: the endpoint is open; swap, compare and result lie in the registered bounce
        // buffer, which is not reused before completion (waited for below).
        self.post("fi_compare_atomic", || unsafe {
            sys::fi_compare_atomic(
                self.core.ep,
                (b.addr() + OPERAND) as *const libc::c_void,
                1,
                desc,
                (b.addr() + COMPARE) as *const libc::c_void,
                desc,
                (b.addr() + RESULT) as *mut libc::c_void,
                desc,
                peer.0,
                addr,
                key,
                dtype.raw(),
                AtomicOp::Cswap.raw(),
                ptr::null_mut(),
            )
        })?;
        self.complete(keep_waiting)?;
        b.read(RESULT, &mut result[..size]).map_err(bad)
    }

    /// Whether `op` on `dtype` runs natively for the `kind` of call on this provider.
    pub fn atomic_native(&self, dtype: Datatype, op: AtomicOp, kind: AtomicKind) -> bool {
        self.core.domain.atomic_native(dtype, op, kind)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.progress.stop.store(true, Ordering::Release);
        if self.core.waitable {
            // SAFETY: the queue is open; fi_cq_signal wakes a thread blocked in fi_cq_sread.
            unsafe { sys::fi_cq_signal(self.core.cq) };
        }
        if let Some(t) = self.progress.thread.take() {
            let _ = t.join();
        }
    }
}
