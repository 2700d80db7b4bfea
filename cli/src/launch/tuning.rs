//! The libfabric settings the ranks of a job started here get, each only where neither the
//! launcher's environment nor the job sets it.
//!
//! They are read once, when libfabric loads in a rank. A rank cannot set them itself: under a
//! process manager its environment is read by the process manager's own thread by then, and a
//! `setenv` would race with that C code's `getenv`. The launcher puts them in the environment
//! each rank starts with, so there is nothing to race with. Jobs started by `srun` or `mpirun`
//! set them in their job script (`docs/transports.md`).

use std::process::Command;

/// `(variable, value)`, measured over tcp;ofi_rxm on this project's 2-core machine
/// (`docs/transports.md`, "Vector accumulates"; `compare/first-window.md`).
const SETTINGS: [(&str, &str); 3] = [
    // rxm carries an atomic in one of its buffers, which take (16 KiB - 104) / 8 = 2035 doubles
    // by default: an accumulate of 4096 went in three messages, served by the target's CPU one
    // after the other (55-64 us against 15-18 for one element). 33 KiB carries 32 KiB of
    // operands and rxm's header: one message, 37-39 us in the same rounds.
    ("FI_OFI_RXM_BUFFER_SIZE", "33792"),
    // rxm preposts 4096 receive buffers per endpoint over tcp (a shared receive context), and a
    // rank has two endpoints: 181 MB resident per rank of `request_overlap` by default, 148 MB
    // with both settings here. 128 is what rxm posts per connection over verbs, which has no
    // shared receive context by default: there the count stays, and only the buffers grow.
    ("FI_OFI_RXM_MSG_RX_SIZE", "128"),
    // The side that accepts a connection looks at rxm's connection events only once it last
    // looked at them this many microseconds ago, 10,000 by default (the side that connects
    // looks at every progress call), so each pair's first connection, made as the first window
    // is created, waited for that: 15-20 ms at 2 ranks, against 1.5 ms with 1,000. The first
    // window at 2 ranks took 0.93x the time, at 4 ranks 0.96x; at 8 and more, where the ranks'
    // start-up keeps both cores busy, the gain is within the spread. A look costs a read of the
    // event queue, once a millisecond.
    ("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000"),
];

/// Set on `cmd` each setting that `is_set` (the launcher's environment and the job's own
/// variables) does not name.
pub(super) fn apply(cmd: &mut Command, is_set: impl Fn(&str) -> bool) {
    for (name, value) in SETTINGS {
        if !is_set(name) {
            cmd.env(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(is_set: impl Fn(&str) -> bool) -> Vec<(String, Option<String>)> {
        let mut cmd = Command::new("true");
        apply(&mut cmd, is_set);
        cmd.get_envs()
            .map(|(k, v)| {
                let v = v.map(|v| v.to_string_lossy().into_owned());
                (k.to_string_lossy().into_owned(), v)
            })
            .collect()
    }

    #[test]
    fn every_setting_is_given_where_none_is_set() {
        let envs = given(|_| false);
        assert_eq!(envs.len(), SETTINGS.len());
        for (name, value) in SETTINGS {
            assert!(envs.contains(&(name.to_string(), Some(value.to_string()))));
        }
    }

    #[test]
    fn a_setting_already_set_is_left_alone() {
        let envs = given(|name| name == "FI_OFI_RXM_BUFFER_SIZE");
        let names: Vec<&str> = envs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["FI_OFI_RXM_CM_PROGRESS_INTERVAL", "FI_OFI_RXM_MSG_RX_SIZE"]
        );
    }
}
