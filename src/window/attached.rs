//! What a rank of a dynamic window knows of attached memory: its own attach table and its
//! copies of the targets' tables.

use crate::protocol::attach::{Slots, View};

/// What a rank knows of the attached memory of a dynamic window.
#[derive(Debug, Default)]
pub(super) struct Attached {
    /// This rank's attach table, as it manages it.
    pub(super) slots: Slots,
    /// Per target: its table as last read.
    pub(super) views: Vec<Option<View>>,
}

impl Attached {
    /// Nothing attached yet, in a window of `n` ranks.
    pub(super) fn new(n: usize) -> Attached {
        Attached {
            slots: Slots::default(),
            views: vec![None; n],
        }
    }
}
