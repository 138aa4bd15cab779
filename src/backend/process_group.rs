//! A `command` turn's processes. The program runs in a process group of its own, and whatever
//! ends the turn (its answer, the time limit, a cancel, a shutdown) ends the whole group:
//! SIGTERM, then SIGKILL after [`KILL_AFTER`] for whatever is still there. Without the group, a
//! wrapper's children (a CLI agent's shells and tool processes) would outlive it as orphans.
//!
//! Ending a group happens in [`Drop`], so a turn future dropped at its time limit or by a
//! cancel ends its processes too. The wait for SIGKILL runs on a thread of its own (a drop
//! cannot await), and [`Reaper::settled`] lets a shutdown wait for those threads instead of
//! exiting under them.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, kill_process_group, test_kill_process_group};
use tokio::sync::watch;

/// How long a group has after SIGTERM before it gets SIGKILL.
pub const KILL_AFTER: Duration = Duration::from_secs(5);

/// How often a terminated group is checked for being gone.
const POLL: Duration = Duration::from_millis(50);

/// Ends process groups, and counts those still being ended so a shutdown can wait for them.
#[derive(Clone)]
pub struct Reaper {
    ending: watch::Sender<usize>,
}

impl Default for Reaper {
    fn default() -> Self {
        Self {
            ending: watch::Sender::new(0),
        }
    }
}

impl Reaper {
    /// Guard the group led by `leader` (a child spawned with `process_group(0)`): dropping the
    /// guard ends the group.
    pub(super) fn guard(&self, leader: u32) -> Option<Group> {
        let pid = Pid::from_raw(i32::try_from(leader).ok()?)?;
        Some(Group {
            pid,
            reaper: self.clone(),
        })
    }

    /// Waits until every group this reaper was ending is gone (at most [`KILL_AFTER`] and a
    /// little after the last one was told to stop).
    pub async fn settled(&self) {
        let mut ending = self.ending.subscribe();
        let _ = ending.wait_for(|n| *n == 0).await;
    }

    /// SIGTERM to the group, then SIGKILL after [`KILL_AFTER`] if any of it is left.
    fn end(&self, pid: Pid) {
        if test_kill_process_group(pid).is_err() {
            return;
        }
        let _ = kill_process_group(pid, Signal::TERM);
        self.ending.send_modify(|n| *n += 1);
        let ending = self.ending.clone();
        let waiting = std::thread::Builder::new()
            .name("baton-reaper".into())
            .spawn(move || {
                let deadline = Instant::now() + KILL_AFTER;
                while group_alive(pid) {
                    if Instant::now() >= deadline {
                        tracing::warn!(
                            pgid = pid.as_raw_nonzero().get(),
                            "a command turn's processes ignored SIGTERM for 5 s; killing them"
                        );
                        let _ = kill_process_group(pid, Signal::KILL);
                        break;
                    }
                    std::thread::sleep(POLL);
                }
                ending.send_modify(|n| *n -= 1);
            });
        if waiting.is_err() {
            // No thread to wait with: kill now rather than leave the group running.
            let _ = kill_process_group(pid, Signal::KILL);
            self.ending.send_modify(|n| *n -= 1);
        }
    }
}

/// Whether any process of the group is left. The leader is reaped here when it has exited, so
/// its zombie (the turn's future, which owned it, is gone) does not count as alive.
fn group_alive(pid: Pid) -> bool {
    let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
    test_kill_process_group(pid).is_ok()
}

/// A running turn's process group; dropping it ends the group.
pub(super) struct Group {
    pid: Pid,
    reaper: Reaper,
}

impl Drop for Group {
    fn drop(&mut self) {
        self.reaper.end(self.pid);
    }
}
