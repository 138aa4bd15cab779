//! The write-ahead log's next pages, brought back into memory before the writer reaches them.
//!
//! The log is written over from its start after each restart (`checkpoint.rs`), so the writer
//! writes into pages it wrote one cycle earlier. A frame (a page and its 24-byte header) never
//! fills whole file-system blocks, so writing one into a block whose page the kernel has dropped
//! from its cache makes the kernel read that block from the disk first, inside the commit.
//! Kernels that reclaim memory ahead of need (DAMON's reclaim on cloud VMs, a cgroup's
//! `memory.high`) drop exactly those pages: written once a cycle and never read, they look cold.
//! On the VM of `BENCHMARKS.md` the writer waited for hundreds of such reads of about 0.3 ms in
//! ten seconds at 1,000 events/s, and every reply queued behind one.
//!
//! So after each commit the writer asks the kernel for the next [`AHEAD`] bytes of the log
//! (`posix_fadvise(WILLNEED)`): dropped pages are read back in the background, and pages still
//! in memory cost a look-up. It asks again once it has written half of that, so each call covers
//! what the writer takes for a while. Where the log lies beyond the end of the file (its first
//! cycle) there is nothing to read, and none is needed: blocks past the end start out zeroed.

use std::fs::File;
use std::path::PathBuf;

/// How far ahead of the writer's position the log is asked for. At 1,000 events/s the log grows
/// by 16–25 MB/s, so this is what the writer reaches in the next 5–8 ms: little time for a page
/// to be dropped again before it is written.
const AHEAD: u64 = 128 * 1024;

/// What the writer has asked to be in memory, by position in the log.
pub(crate) struct LogAhead {
    /// `<database>-wal`.
    path: PathBuf,
    /// Opened at the first ask: the log exists once the first commit has written it. `None`
    /// while it cannot be opened (then nothing is asked, and writes merely wait as before).
    file: Option<File>,
    /// The next ask's range.
    plan: Plan,
}

impl LogAhead {
    pub(crate) fn new(path: PathBuf) -> Self {
        LogAhead {
            path,
            file: None,
            plan: Plan::default(),
        }
    }

    /// After a commit whose last frame ends `end` bytes into the log file (its header
    /// included).
    pub(crate) fn committed(&mut self, end: u64) {
        let Some((offset, len)) = self.plan.after(end) else {
            return;
        };
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        if let Some(file) = &self.file {
            advise(file, offset, len);
        }
    }
}

#[cfg(target_os = "linux")]
fn advise(file: &File, offset: u64, len: u64) {
    use rustix::fs::{Advice, fadvise};
    // Only a hint: if the kernel refuses it, a write reads what it needs as it always did.
    if let Err(err) = fadvise(
        file,
        offset,
        std::num::NonZeroU64::new(len),
        Advice::WillNeed,
    ) {
        tracing::debug!(%err, "cannot ask for the WAL's next pages");
    }
}

/// Elsewhere the writer simply writes.
#[cfg(not(target_os = "linux"))]
fn advise(_: &File, _: u64, _: u64) {}

/// Which range to ask for next, from the writer's positions. Pure, so its rule has tests.
#[derive(Debug, Default)]
struct Plan {
    /// The log's end after the last commit.
    end: u64,
    /// Everything before this has been asked for since the log last started over.
    asked_to: u64,
}

impl Plan {
    /// The range `(offset, length)` to ask for after a commit that left the log `end` bytes
    /// long, if any: the next [`AHEAD`] bytes, once less than half of that is left asked for.
    /// A log shorter than before has started over, and is asked for again from its start.
    fn after(&mut self, end: u64) -> Option<(u64, u64)> {
        if end < self.end {
            self.asked_to = 0;
        }
        self.end = end;
        if self.asked_to >= end + AHEAD / 2 {
            return None;
        }
        let offset = end.max(self.asked_to);
        self.asked_to = end + AHEAD;
        Some((offset, self.asked_to - offset))
    }
}

#[cfg(test)]
mod tests {
    use super::{AHEAD, Plan};

    #[test]
    fn asks_for_the_next_pages_once_half_of_them_are_written() {
        let mut plan = Plan::default();
        assert_eq!(plan.after(0), Some((0, AHEAD)));
        assert_eq!(plan.after(4096), None);
        assert_eq!(plan.after(AHEAD / 2), None);
        // Less than half left: the rest of the next AHEAD bytes, not what was asked already.
        assert_eq!(plan.after(AHEAD / 2 + 1), Some((AHEAD, AHEAD / 2 + 1)));
        assert_eq!(plan.after(AHEAD / 2 + 10), None);
    }

    #[test]
    fn a_commit_past_everything_asked_asks_from_its_own_end() {
        let mut plan = Plan::default();
        assert_eq!(plan.after(0), Some((0, AHEAD)));
        let far = 10 * AHEAD;
        assert_eq!(plan.after(far), Some((far, AHEAD)));
    }

    #[test]
    fn a_log_that_started_over_is_asked_for_from_its_start() {
        let mut plan = Plan::default();
        let late = 100 * AHEAD;
        assert_eq!(plan.after(late), Some((late, AHEAD)));
        // A restart: the next commit wrote from the start of the file again.
        assert_eq!(plan.after(6000), Some((6000, AHEAD)));
        assert_eq!(plan.after(7000), None);
    }
}
