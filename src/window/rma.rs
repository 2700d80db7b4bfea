//! Communication calls: put and get.
//!
//! Each call checks the rank (MPI_ERR_RANK), the epoch (MPI_ERR_RMA_SYNC) and the target range
//! (MPI_ERR_RMA_RANGE) before anything moves; it returns when the origin buffer may be reused
//! (put) or holds the data (get), so the borrow of the buffer covers the whole transfer. Only a
//! call that succeeded counts as an RMA call of the epoch: a refused one changes no epoch state.
//!
//! [`Window::put_many`] and [`Window::get_many`] are as many puts or gets in one call: each is
//! checked as its single twin is before anything moves, then all of them are in flight together
//! and the call returns when the last is complete at this origin. That is MPI_PUT or MPI_GET
//! called once per transfer and then MPI_WIN_FLUSH_LOCAL, the pattern of a bandwidth loop: over
//! the fabric the transfers overlap instead of waiting a round trip each, and still go from and
//! into the caller's buffers without a copy, since the borrow of every buffer covers the call
//! (the request forms copy through buffers the endpoint owns, because a request may be leaked).
//!
//! # MPI-4.1: 12.3.1 (MPI_PUT), 12.3.2 (MPI_GET), 12.5.4 (MPI_WIN_FLUSH_LOCAL)

use super::Window;
use crate::error::Result;
use crate::error::in_call;
use crate::transport::{Part, Space, Transport};
use bytemuck::Pod;

/// The parts of a batch sorted by the transport index of their target.
type ByRoute<B> = Vec<Vec<Part<B>>>;

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
            match self.direct.data(target).filter(|_| space == Space::Data) {
                Some(mem) => mem.write(off, bytes)?,
                None => self.route(target).put(target, space, off, bytes)?,
            }
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
            match self.direct.data(target).filter(|_| space == Space::Data) {
                Some(mem) => mem.read(off, bytes)?,
                None => self.route(target).get(target, space, off, bytes)?,
            }
            self.epochs.borrow_mut().issued();
            Ok(())
        })
    }

    /// Write each `(origin, target, disp)` of `puts` as [`Window::put`] would, the writes in
    /// flight together; returns when every origin buffer may be reused. Every put is checked
    /// before anything moves: one refused (rank, epoch, range) refuses the call.
    ///
    /// # MPI-4.1: 12.3.1, 12.5.4
    pub fn put_many<'a, T: Pod>(
        &self,
        puts: impl IntoIterator<Item = (&'a [T], usize, usize)>,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Put", || {
            let bytes = puts
                .into_iter()
                .map(|(o, t, d)| (bytemuck::cast_slice(o), t, d));
            let routes = self.by_route(bytes)?;
            self.hand_over(routes.iter().enumerate(), |t, p| t.put_many(p))
        })
    }

    /// Read into each `(origin, target, disp)` of `gets` as [`Window::get`] would, the reads in
    /// flight together; returns with the data in every origin buffer. Every get is checked
    /// before anything moves: one refused (rank, epoch, range) refuses the call.
    ///
    /// # MPI-4.1: 12.3.2, 12.5.4
    pub fn get_many<'a, T: Pod>(
        &self,
        gets: impl IntoIterator<Item = (&'a mut [T], usize, usize)>,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Get", || {
            let bytes = gets
                .into_iter()
                .map(|(o, t, d)| (bytemuck::cast_slice_mut(o), t, d));
            let mut routes = self.by_route(bytes)?;
            self.hand_over(routes.iter_mut().enumerate(), |t, p| t.get_many(p))
        })
    }

    /// Check every `(bytes, target, disp)` of a batch as its single twin is checked, and sort
    /// them by the transport that reaches their target.
    fn by_route<B: AsRef<[u8]>>(
        &self,
        items: impl Iterator<Item = (B, usize, usize)>,
    ) -> Result<ByRoute<B>> {
        let mut routes: ByRoute<B> = self.transports.iter().map(|_| Vec::new()).collect();
        for (bytes, target, disp) in items {
            let (space, offset) = self.place(target, disp, bytes.as_ref().len(), false)?;
            routes[self.routes[target]].push(Part {
                target,
                space,
                offset,
                bytes,
            });
        }
        Ok(routes)
    }

    /// Hand each transport its parts with `go`; the call counts for the epoch once data moved,
    /// also when a later transport fails.
    fn hand_over<P: AsRef<[Part<B>]>, B>(
        &self,
        routes: impl Iterator<Item = (usize, P)>,
        go: impl Fn(&dyn Transport, P) -> Result<()>,
    ) -> Result<()> {
        let (mut moved, mut result) = (false, Ok(()));
        for (route, parts) in routes.filter(|(_, p)| !p.as_ref().is_empty()) {
            moved = true;
            result = go(self.by(route), parts);
            if result.is_err() {
                break;
            }
        }
        if moved {
            self.epochs.borrow_mut().issued();
        }
        result
    }
}
