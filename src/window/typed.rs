//! Typed windows: a [`TypedWindow`] holds elements of one type `T` on every rank, and its
//! displacements and sizes count elements, so that a displacement in bytes cannot be mistaken
//! for an index.
//!
//! A typed window is a [`Window`] whose displacement unit is `size_of::<T>()` on every rank
//! (checked when it is created: MPI_ERR_DISP otherwise, on every rank, as each knows the others'
//! units), with the RMA calls taking `&[T]` and element indices. Everything else (epochs,
//! flushes, `shared_query`, notifications, strided layouts, the info) is the window's, reached
//! through `Deref`; the window's own calls count displacements in the same unit, so they also
//! take element indices there. Dynamic windows stay byte windows: their displacements are
//! addresses.
//!
//! # MPI-4.1: 12.2.1-12.2.3 (the displacement unit), 12.3 (communication calls)

use super::atomic::AtomicElem;
use super::setup::create_lent;
use super::{Request, Window};
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::protocol::reduce::Op;
use crate::world::Comm;
use bytemuck::Pod;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::Deref;

/// A window of elements of type `T` on every rank: displacements and lengths count elements.
/// The synchronization calls and the rest of [`Window`]'s API are reached through `Deref`.
#[derive(Debug)]
pub struct TypedWindow<'a, T> {
    win: Window<'a>,
    _elem: PhantomData<fn() -> T>,
}

impl<'a, T> Deref for TypedWindow<'a, T> {
    type Target = Window<'a>;
    fn deref(&self) -> &Window<'a> {
        &self.win
    }
}

impl<'a, T> Borrow<Window<'a>> for TypedWindow<'a, T> {
    fn borrow(&self) -> &Window<'a> {
        &self.win
    }
}

/// `count` elements of `T` in bytes, or MPI_ERR_SIZE.
fn bytes_of<T>(count: usize) -> Result<usize> {
    count.checked_mul(size_of::<T>()).ok_or_else(|| {
        Error::new(
            ErrorClass::Size,
            format!(
                "{count} elements of {} bytes overflow the address space",
                size_of::<T>()
            ),
        )
    })
}

/// Whether every rank's displacement unit is the size of `T` and its memory whole elements:
/// MPI_ERR_DISP otherwise (a rank that created the window with another element type).
fn check_units<T>(win: &Window<'_>) -> Result<()> {
    let unit = size_of::<T>();
    for (rank, e) in win.extents.iter().enumerate() {
        if e.disp_unit != unit || e.size % unit != 0 {
            return Err(Error::new(
                ErrorClass::Disp,
                format!(
                    "rank {rank} has {} bytes in units of {} bytes, where a typed window of \
                     this element type needs whole elements of {unit} bytes",
                    e.size, e.disp_unit
                ),
            ));
        }
    }
    Ok(())
}

impl<T: Pod> TypedWindow<'static, T> {
    /// Allocate `count` elements on this rank and open them, with those of every rank of
    /// `comm`, as a typed window. Collective over `comm`, as [`Window::allocate`].
    ///
    /// # MPI-4.1: 12.2.2 (MPI_WIN_ALLOCATE)
    pub fn allocate(comm: &Comm, count: usize, info: &Info) -> Result<TypedWindow<'static, T>> {
        TypedWindow::allocated(comm, count, info, Window::allocate, "MPI_Win_allocate")
    }

    /// Like [`TypedWindow::allocate`], with memory every rank of the node can load and store,
    /// as [`Window::allocate_shared`].
    ///
    /// # MPI-4.1: 12.2.3 (MPI_WIN_ALLOCATE_SHARED)
    pub fn allocate_shared(
        comm: &Comm,
        count: usize,
        info: &Info,
    ) -> Result<TypedWindow<'static, T>> {
        let call = "MPI_Win_allocate_shared";
        TypedWindow::allocated(comm, count, info, Window::allocate_shared, call)
    }

    /// `count` elements allocated by `allocate` (a window constructor, `call` in errors), typed.
    fn allocated(
        comm: &Comm,
        count: usize,
        info: &Info,
        allocate: fn(&Comm, usize, usize, &Info) -> Result<Window<'static>>,
        call: &'static str,
    ) -> Result<TypedWindow<'static, T>> {
        let bytes = in_call(Some(comm.rank()), call, || bytes_of::<T>(count))?;
        TypedWindow::checked(allocate(comm, bytes, size_of::<T>(), info)?, call)
    }
}

impl<'a, T: Pod> TypedWindow<'a, T> {
    /// `win`, typed (its units unchecked).
    fn wrap(win: Window<'a>) -> TypedWindow<'a, T> {
        TypedWindow {
            win,
            _elem: PhantomData,
        }
    }

    /// The window `win`, typed, if every rank's unit is `T`'s size; else `win` is freed
    /// (collectively: every rank finds the same) and MPI_ERR_DISP returned from `call`.
    fn checked(win: Window<'a>, call: &'static str) -> Result<TypedWindow<'a, T>> {
        match check_units::<T>(&win) {
            Ok(()) => Ok(TypedWindow::wrap(win)),
            Err(e) => {
                let rank = win.rank();
                let _ = win.free();
                in_call(Some(rank), call, || Err(e))
            }
        }
    }

    /// Open `memory`, lent by the caller, as a typed window, run `body` on it, then free it
    /// collectively, as [`Window::create`] does.
    ///
    /// # MPI-4.1: 12.2.1 (MPI_WIN_CREATE)
    pub fn create<R>(
        comm: &Comm,
        memory: &'a mut [T],
        info: &Info,
        body: impl FnOnce(&TypedWindow<'a, T>) -> R,
    ) -> Result<R> {
        in_call(Some(comm.rank()), "MPI_Win_create", || {
            let run = |w: &TypedWindow<'a, T>| check_units::<T>(&w.win).map(|()| body(w));
            create_lent(comm, memory, size_of::<T>(), info, TypedWindow::wrap, run)?
        })
    }

    /// The window underneath, whose displacements count elements of `T` too.
    pub fn window(&self) -> &Window<'a> {
        &self.win
    }

    /// How many elements this rank's memory holds.
    pub fn len(&self) -> usize {
        self.win.size() / size_of::<T>()
    }

    /// Whether this rank's memory holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many elements `target`'s memory holds (MPI_ERR_RANK for a rank outside the group).
    pub fn len_of(&self, target: usize) -> Result<usize> {
        Ok(self.win.extent(target)?.size / size_of::<T>())
    }

    /// Write `origin` into `target`'s elements from `index` on, as [`Window::put`].
    ///
    /// # MPI-4.1: 12.3.2 (MPI_PUT)
    pub fn put(&self, origin: &[T], target: usize, index: usize) -> Result<()> {
        self.win.put(origin, target, index)
    }

    /// Read `target`'s elements from `index` on into `origin`, as [`Window::get`].
    ///
    /// # MPI-4.1: 12.3.3 (MPI_GET)
    pub fn get(&self, origin: &mut [T], target: usize, index: usize) -> Result<()> {
        self.win.get(origin, target, index)
    }

    /// [`TypedWindow::put`], returning a request at once, as [`Window::rput`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RPUT)
    pub fn rput<'s>(&'s self, origin: &'s [T], target: usize, index: usize) -> Result<Request<'s>> {
        self.win.rput(origin, target, index)
    }

    /// [`TypedWindow::get`], returning a request at once, as [`Window::rget`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RGET)
    pub fn rget<'s>(
        &'s self,
        origin: &'s mut [T],
        target: usize,
        index: usize,
    ) -> Result<Request<'s>> {
        self.win.rget(origin, target, index)
    }

    /// Free the window, as [`Window::free`].
    ///
    /// # MPI-4.1: 12.2.5 (MPI_WIN_FREE)
    pub fn free(self) -> Result<()> {
        self.win.free()
    }
}

impl<T: AtomicElem> TypedWindow<'_, T> {
    /// Combine `origin` into `target`'s elements from `index` on with `op`, as
    /// [`Window::accumulate`].
    ///
    /// # MPI-4.1: 12.3.4 (MPI_ACCUMULATE)
    pub fn accumulate(&self, origin: &[T], target: usize, index: usize, op: Op) -> Result<()> {
        self.win.accumulate(origin, target, index, op)
    }

    /// Like [`TypedWindow::accumulate`], with the elements' previous values in `result`, as
    /// [`Window::get_accumulate`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_GET_ACCUMULATE)
    pub fn get_accumulate(
        &self,
        origin: &[T],
        result: &mut [T],
        target: usize,
        index: usize,
        op: Op,
    ) -> Result<()> {
        self.win.get_accumulate(origin, result, target, index, op)
    }

    /// Combine `origin` into element `index` of `target` and return its previous value, as
    /// [`Window::fetch_and_op`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_FETCH_AND_OP)
    pub fn fetch_and_op(&self, origin: T, target: usize, index: usize, op: Op) -> Result<T> {
        self.win.fetch_and_op(origin, target, index, op)
    }

    /// Store `origin` in element `index` of `target` if it equals `compare`; its previous
    /// value, as [`Window::compare_and_swap`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_COMPARE_AND_SWAP)
    pub fn compare_and_swap(
        &self,
        origin: T,
        compare: T,
        target: usize,
        index: usize,
    ) -> Result<T> {
        self.win.compare_and_swap(origin, compare, target, index)
    }

    /// [`TypedWindow::accumulate`], returning a request at once, as [`Window::raccumulate`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RACCUMULATE)
    pub fn raccumulate<'s>(
        &'s self,
        origin: &'s [T],
        target: usize,
        index: usize,
        op: Op,
    ) -> Result<Request<'s>> {
        self.win.raccumulate(origin, target, index, op)
    }

    /// [`TypedWindow::get_accumulate`], returning a request at once, as
    /// [`Window::rget_accumulate`].
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RGET_ACCUMULATE)
    pub fn rget_accumulate<'s>(
        &'s self,
        origin: &'s [T],
        result: &'s mut [T],
        target: usize,
        index: usize,
        op: Op,
    ) -> Result<Request<'s>> {
        self.win.rget_accumulate(origin, result, target, index, op)
    }
}
