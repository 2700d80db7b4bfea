//! Communication calls: put and get.
//!
//! Each call checks the rank (MPI_ERR_RANK), the epoch (MPI_ERR_RMA_SYNC) and the target range
//! (MPI_ERR_RMA_RANGE) before anything moves; it returns when the origin buffer may be reused
//! (put) or holds the data (get), so the borrow of the buffer covers the whole transfer. Only a
//! call that succeeded counts as an RMA call of the epoch: a refused one changes no epoch state.
//!
//! # MPI-4.1: 12.3.1 (MPI_PUT), 12.3.2 (MPI_GET)

use super::Window;
use crate::error::Result;
use crate::error::in_call;
use bytemuck::Pod;

impl Window<'_> {
    /// Write `origin` into `target`'s window at displacement `disp` (in the target's
    /// displacement unit). Valid inside an access epoch that covers `target`.
    ///
    /// # MPI-4.1: 12.3.1
    #[inline]
    pub fn put<T: Pod>(&self, origin: &[T], target: usize, disp: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Put", || {
            let bytes: &[u8] = bytemuck::cast_slice(origin);
            let (space, off) = self.place(target, disp, bytes.len(), false)?;
            self.route(target).put(target, space, off, bytes)?;
            self.epochs.borrow_mut().issued();
            Ok(())
        })
    }

    /// Read `origin.len()` elements from `target`'s window at displacement `disp` into `origin`.
    /// Valid inside an access epoch that covers `target`.
    ///
    /// # MPI-4.1: 12.3.2
    #[inline]
    pub fn get<T: Pod>(&self, origin: &mut [T], target: usize, disp: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Get", || {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(origin);
            let (space, off) = self.place(target, disp, bytes.len(), false)?;
            self.route(target).get(target, space, off, bytes)?;
            self.epochs.borrow_mut().issued();
            Ok(())
        })
    }
}
