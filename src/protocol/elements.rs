//! Element layouts of noncontiguous transfers: which elements of a buffer (origin side) or of a
//! target's memory from a displacement (target side) a put, get or accumulate moves, in order.
//!
//! A [`Layout`] is a list of runs of consecutive elements, built from the shapes MPI's derived
//! datatypes describe most (contiguous, vector, indexed blocks, subarrays of any dimension in C
//! order) and merged where runs touch. [`pair`] walks an origin and a target layout together and
//! cuts them into segments that are contiguous on both sides: what a transport moves with one
//! copy or one operation.
//!
//! # MPI-4.1: 5.1.2 (MPI_TYPE_VECTOR), 5.1.6 (MPI_TYPE_INDEXED_BLOCK), 5.1.3 (MPI_TYPE_CREATE_SUBARRAY),
//! 12.3 (origin and target datatypes of RMA calls)

use crate::error::{Error, ErrorClass, Result};

/// `len` consecutive elements from element `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    start: usize,
    len: usize,
}

/// Which elements a transfer moves, in order, counted in elements from the buffer's start (or
/// the target displacement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    runs: Vec<Run>,
    count: usize,
    /// One past the highest element any run covers.
    extent: usize,
}

fn too_large() -> Error {
    Error::new(ErrorClass::Count, "layout extent overflows")
}

impl Layout {
    /// Build from runs in transfer order, dropping empty ones and merging runs that touch.
    fn from_runs(runs: impl IntoIterator<Item = (usize, usize)>) -> Result<Layout> {
        let mut merged: Vec<Run> = Vec::new();
        let (mut count, mut extent) = (0usize, 0usize);
        for (start, len) in runs.into_iter().filter(|&(_, len)| len > 0) {
            let end = start.checked_add(len).ok_or_else(too_large)?;
            count = count.checked_add(len).ok_or_else(too_large)?;
            extent = extent.max(end);
            match merged.last_mut() {
                Some(last) if last.start + last.len == start => last.len += len,
                _ => merged.push(Run { start, len }),
            }
        }
        Ok(Layout {
            runs: merged,
            count,
            extent,
        })
    }

    /// `count` consecutive elements (MPI_TYPE_CONTIGUOUS).
    pub fn contiguous(count: usize) -> Layout {
        Layout::from_runs([(0, count)]).expect("one run cannot overflow")
    }

    /// `count` blocks of `block` elements, each starting `stride` elements after the previous
    /// one (MPI_TYPE_VECTOR with a non-negative stride); MPI_ERR_COUNT if the extent overflows.
    pub fn vector(count: usize, block: usize, stride: usize) -> Result<Layout> {
        let last = count.saturating_sub(1);
        last.checked_mul(stride)
            .and_then(|s| s.checked_add(block))
            .ok_or_else(too_large)?;
        Layout::from_runs((0..count).map(|i| (i * stride, block)))
    }

    /// Blocks of `(displacement, length)` in elements, in this order (MPI_TYPE_INDEXED).
    pub fn indexed(blocks: &[(usize, usize)]) -> Result<Layout> {
        Layout::from_runs(blocks.iter().copied())
    }

    /// The `subsizes` box starting at `starts` of an array of `sizes` elements per dimension,
    /// stored in C order (the last dimension varies fastest): MPI_TYPE_CREATE_SUBARRAY with
    /// MPI_ORDER_C. MPI_ERR_ARG where the dimensions disagree or the box leaves the array.
    pub fn subarray(sizes: &[usize], subsizes: &[usize], starts: &[usize]) -> Result<Layout> {
        let dims = sizes.len();
        if dims == 0 || subsizes.len() != dims || starts.len() != dims {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "subarray of {dims} sizes, {} subsizes, {} starts",
                    subsizes.len(),
                    starts.len()
                ),
            ));
        }
        for d in 0..dims {
            if starts[d]
                .checked_add(subsizes[d])
                .is_none_or(|e| e > sizes[d])
            {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "subarray dimension {d}: {} elements from {} leave a size of {}",
                        subsizes[d], starts[d], sizes[d]
                    ),
                ));
            }
        }
        // Elements per step of each dimension.
        let mut pitch = vec![1usize; dims];
        for d in (0..dims - 1).rev() {
            pitch[d] = pitch[d + 1]
                .checked_mul(sizes[d + 1])
                .ok_or_else(too_large)?;
        }
        pitch[0].checked_mul(sizes[0]).ok_or_else(too_large)?;
        let rows: usize = subsizes[..dims - 1].iter().product();
        let row_len = subsizes[dims - 1];
        let runs = (0..rows).map(|mut r| {
            let mut at = starts[dims - 1];
            for d in (0..dims - 1).rev() {
                at += (starts[d] + r % subsizes[d]) * pitch[d];
                r /= subsizes[d];
            }
            (at, row_len)
        });
        Layout::from_runs(runs)
    }

    /// How many elements move.
    pub fn count(&self) -> usize {
        self.count
    }

    /// One past the highest element the layout reaches: the span it needs from its start.
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// How many runs of consecutive elements it has (after merging).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The first element of its only run, where it has exactly one.
    pub(crate) fn single(&self) -> Option<usize> {
        match self.runs[..] {
            [r] => Some(r.start),
            _ => None,
        }
    }

    /// Its runs in transfer order, as (first element, elements).
    pub(crate) fn spans(&self) -> impl Iterator<Item = (usize, usize)> + Clone + '_ {
        self.runs.iter().map(|r| (r.start, r.len))
    }
}

/// MPI_ERR_COUNT unless `origin` and `target` move as many elements.
pub fn same_count(origin: &Layout, target: &Layout) -> Result<()> {
    if origin.count != target.count {
        return Err(Error::new(
            ErrorClass::Count,
            format!(
                "origin layout moves {} elements, target layout {}",
                origin.count, target.count
            ),
        ));
    }
    Ok(())
}

/// A piece of a transfer contiguous on both sides: `len` elements from element `origin` of the
/// origin buffer to element `target` from the target displacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First origin element.
    pub origin: usize,
    /// First target element.
    pub target: usize,
    /// Elements.
    pub len: usize,
}

/// Cut `origin` and `target` into segments contiguous on both sides, in transfer order;
/// MPI_ERR_COUNT unless they move as many elements.
pub fn pair(origin: &Layout, target: &Layout) -> Result<Vec<Segment>> {
    same_count(origin, target)?;
    let mut out = Vec::with_capacity(origin.runs.len().max(target.runs.len()));
    let (mut o, mut t) = (origin.runs.iter(), target.runs.iter());
    let (mut a, mut b) = (o.next().copied(), t.next().copied());
    while let (Some(x), Some(y)) = (a.as_mut(), b.as_mut()) {
        let len = x.len.min(y.len);
        out.push(Segment {
            origin: x.start,
            target: y.start,
            len,
        });
        x.start += len;
        x.len -= len;
        y.start += len;
        y.len -= len;
        if x.len == 0 {
            a = o.next().copied();
        }
        if y.len == 0 {
            b = t.next().copied();
        }
    }
    Ok(out)
}

/// Group `segments` (in transfer order) into runs contiguous on the target side: what a
/// transport moves with one operation once the origin side is packed.
pub fn target_runs(segments: &[Segment]) -> Vec<&[Segment]> {
    let mut out = Vec::new();
    let mut from = 0;
    for i in 1..=segments.len() {
        let breaks = i == segments.len() || {
            let prev = &segments[i - 1];
            prev.target + prev.len != segments[i].target
        };
        if breaks {
            out.push(&segments[from..i]);
            from = i;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(l: &Layout) -> Vec<(usize, usize)> {
        l.runs.iter().map(|r| (r.start, r.len)).collect()
    }

    #[test]
    fn shapes_become_runs() {
        let v = Layout::vector(3, 2, 5).unwrap();
        assert_eq!(runs(&v), [(0, 2), (5, 2), (10, 2)]);
        assert_eq!((v.count(), v.extent()), (6, 12));
        // A stride equal to the block is contiguous.
        assert_eq!(runs(&Layout::vector(4, 3, 3).unwrap()), [(0, 12)]);
        let i = Layout::indexed(&[(7, 1), (8, 2), (0, 3), (4, 0)]).unwrap();
        assert_eq!(runs(&i), [(7, 3), (0, 3)]);
        assert_eq!((i.count(), i.extent()), (6, 10));
        assert_eq!(Layout::contiguous(0).count(), 0);
        assert!(Layout::vector(usize::MAX, 1, 2).is_err());
    }

    #[test]
    fn subarrays_in_c_order() {
        // Rows 1..3, columns 2..4 of a 4 x 5 array.
        let s = Layout::subarray(&[4, 5], &[2, 2], &[1, 2]).unwrap();
        assert_eq!(runs(&s), [(7, 2), (12, 2)]);
        // A 3-D box: planes 0..2, row 1, columns 0..3 of 2 x 3 x 3.
        let s = Layout::subarray(&[2, 3, 3], &[2, 1, 3], &[0, 1, 0]).unwrap();
        assert_eq!(runs(&s), [(3, 3), (12, 3)]);
        // Whole rows merge.
        let s = Layout::subarray(&[4, 5], &[2, 5], &[1, 0]).unwrap();
        assert_eq!(runs(&s), [(5, 10)]);
        for bad in [
            Layout::subarray(&[4, 5], &[2, 4], &[1, 2]),
            Layout::subarray(&[4, 5], &[2], &[1, 2]),
            Layout::subarray(&[], &[], &[]),
        ] {
            assert_eq!(bad.unwrap_err().class(), ErrorClass::Arg);
        }
    }

    #[test]
    fn pairs_cut_where_either_side_breaks() {
        let o = Layout::vector(2, 3, 4).unwrap();
        let t = Layout::indexed(&[(10, 2), (20, 4)]).unwrap();
        let seg = |origin, target, len| Segment {
            origin,
            target,
            len,
        };
        assert_eq!(
            pair(&o, &t).unwrap(),
            [seg(0, 10, 2), seg(2, 20, 1), seg(4, 21, 3)]
        );
        assert_eq!(
            pair(&Layout::contiguous(5), &t).unwrap_err().class(),
            ErrorClass::Count
        );
        assert!(
            pair(&Layout::contiguous(0), &Layout::contiguous(0))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn segments_group_by_target_run() {
        let o = Layout::vector(4, 1, 2).unwrap();
        let t = Layout::indexed(&[(0, 3), (9, 1)]).unwrap();
        let segs = pair(&o, &t).unwrap();
        assert_eq!(segs.len(), 4);
        let runs: Vec<usize> = target_runs(&segs).iter().map(|g| g.len()).collect();
        assert_eq!(runs, [3, 1]);
        assert!(target_runs(&[]).is_empty());
    }
}
