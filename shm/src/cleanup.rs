//! Removal of a job's shared-memory segments.
//!
//! Every segment of a job is a file `/dev/shm/onesided-<job>-...` where the job id is
//! `<launcher pid>-<8 hex digits>`. The launcher removes its own job's segments on exit with
//! [`remove_job_segments`], and at start removes those of jobs whose launcher is gone (killed
//! with `SIGKILL`, so it could not clean up) with [`remove_stale_segments`]. libfabric's shm
//! provider names its segments `<pid>:<n>:<m>` after their owner: [`remove_fabric_segments`]
//! removes those of given processes, [`remove_dead_fabric_segments`] those of every process
//! that is gone.

use std::fs;
use std::io;
use std::path::Path;

use crate::process::pid_alive;

/// Directory where POSIX shared-memory objects live.
pub const SHM_DIR: &str = "/dev/shm";

/// Prefix of the file name of every onesided segment.
pub const SEGMENT_PREFIX: &str = "onesided-";

/// Removes every `/dev/shm/onesided-<job>-*`; returns how many were removed.
///
/// `job` must be non-empty and contain no `/`, otherwise the call fails with `InvalidInput`.
pub fn remove_job_segments(job: &str) -> io::Result<usize> {
    if job.is_empty() || job.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid job id {job:?}"),
        ));
    }
    let prefix = format!("{SEGMENT_PREFIX}{job}-");
    remove_matching(Path::new(SHM_DIR), |name| name.starts_with(&prefix))
}

/// Removes the segments `/dev/shm/onesided-<pid>-*` of every launcher pid that is no longer
/// alive; returns how many were removed.
pub fn remove_stale_segments() -> io::Result<usize> {
    remove_matching(Path::new(SHM_DIR), |name| {
        launcher_pid(name).is_some_and(|pid| !pid_alive(pid))
    })
}

/// Removes the segments libfabric's shm provider names `/dev/shm/<pid>:<n>:<m>` for every pid
/// of `pids` (ranks of a finished job: a rank killed, or one that exited without closing its
/// endpoints, leaves them behind); returns how many were removed.
pub fn remove_fabric_segments(pids: &[u32]) -> io::Result<usize> {
    remove_matching(Path::new(SHM_DIR), |name| {
        fabric_pid(name).is_some_and(|pid| pids.contains(&pid))
    })
}

/// Removes the libfabric shm segments `/dev/shm/<pid>:<n>:<m>` of every pid that no longer
/// runs (left by processes killed with `SIGKILL` under any process manager); returns how many
/// were removed. A segment whose pid was reused by a live process is left alone.
pub fn remove_dead_fabric_segments() -> io::Result<usize> {
    remove_matching(Path::new(SHM_DIR), |name| {
        fabric_pid(name).is_some_and(|pid| !crate::process::pid_running(pid))
    })
}

/// The owner pid in a libfabric shm segment name `<pid>:...`, if the name has that form.
fn fabric_pid(name: &str) -> Option<u32> {
    let (pid, _) = name.split_once(':')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The launcher pid in a segment name `onesided-<pid>-...`, if the name has that form.
fn launcher_pid(name: &str) -> Option<u32> {
    let (pid, _) = name.strip_prefix(SEGMENT_PREFIX)?.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Unlinks the files of `dir` whose names satisfy `wanted`; files that vanish meanwhile are
/// skipped. Returns how many this call removed, or the first error after trying all of them.
fn remove_matching(dir: &Path, wanted: impl Fn(&str) -> bool) -> io::Result<usize> {
    let mut removed = 0;
    let mut first_error = None;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !wanted(name) {
            continue;
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(removed), Err)
}

#[cfg(test)]
mod tests {
    use super::{fabric_pid, launcher_pid};

    #[test]
    fn parses_launcher_pid() {
        assert_eq!(launcher_pid("onesided-1234-0badf00d-win3"), Some(1234));
        assert_eq!(launcher_pid("onesided-x12-0badf00d"), None);
        assert_eq!(launcher_pid("onesided--0badf00d"), None);
        assert_eq!(launcher_pid("other-1234-0badf00d"), None);
        assert_eq!(launcher_pid("onesided-1234"), None);
    }

    #[test]
    fn parses_fabric_pid() {
        assert_eq!(fabric_pid("4321:0:0"), Some(4321));
        assert_eq!(fabric_pid("4321"), None);
        assert_eq!(fabric_pid("x1:0:0"), None);
        assert_eq!(fabric_pid(":0:0"), None);
    }
}
