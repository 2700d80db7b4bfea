//! Window creation: what it costs in collectives.

use super::{FLAVORS, window};
use crate::info::Info;
use crate::world::inproc;

#[test]
fn a_window_on_one_node_takes_four_collectives() {
    for flavor in FLAVORS {
        let used = inproc::run(3, |world| {
            let before = world.seqs();
            let win = window(&world, flavor, 64, 8, &Info::new()).unwrap();
            let after = world.seqs();
            win.free().unwrap();
            // Every collective takes one sequence number, and so does the segment's name.
            after - before - 1
        });
        assert_eq!(used, vec![4; 3], "{flavor:?}");
    }
}
