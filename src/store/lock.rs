//! One gateway per database file: an exclusive lock on `<database>.lock`, holding the pid.
//!
//! Two gateways on one database both ran, with no warning: every heartbeat ran twice, and the
//! second re-ran the first one's live inbox as "left unfinished". SQLite's own locks cannot
//! prevent that (they serialise transactions, not processes), so `baton run` and `baton chat`
//! take this lock before they open anything. It is an advisory `flock` (through
//! [`std::fs::File::try_lock`]): the kernel drops it when the process ends, even by `kill -9`, so
//! a lock file left behind is harmless and is never deleted (deleting it would let a third
//! process lock a fresh file while the second still holds the old one). Commands that only read
//! the store do not take it and keep working beside a running gateway. A memory database belongs
//! to its process alone and needs no lock.
//!
//! The lock is per file, not per spelling of its path: the lock file sits beside the
//! database's canonical path (symlinks and `.`/`..` resolved), so a symlink to the database, or
//! the same file reached another way, finds the same lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why the database could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "the database {database} is in use by another baton ({holder}, holding {}); stop it \
         first, or give this one its own file with --database",
        .lock_file.display()
    )]
    Held {
        /// The database file.
        database: String,
        /// The lock file beside it.
        lock_file: PathBuf,
        /// `pid N` as written in the lock file, or what is known when it cannot be read.
        holder: String,
    },
    /// The lock file could not be created or locked.
    #[error(
        "cannot lock {}: {source}; check that its directory exists and is writable, or pass \
         --database",
        .lock_file.display()
    )]
    Io {
        /// The lock file.
        lock_file: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; released when dropped (or when the process ends, however it ends).
#[derive(Debug)]
pub struct DatabaseLock {
    _file: File,
}

impl DatabaseLock {
    /// Locks `database` for this process, or says which process holds it. `None` for
    /// `":memory:"`, which no other process can open.
    pub fn acquire(database: &str) -> Result<Option<DatabaseLock>, LockError> {
        if database == ":memory:" {
            return Ok(None);
        }
        let mut lock_file = canonical(Path::new(database)).into_os_string();
        lock_file.push(".lock");
        let lock_file = PathBuf::from(lock_file);
        let io = |source| LockError::Io {
            lock_file: lock_file.clone(),
            source,
        };
        // Not truncated on open: the holder's pid must survive a loser's open.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_file)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    database: database.to_owned(),
                    holder: holder(&lock_file),
                    lock_file,
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        file.set_len(0).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Some(DatabaseLock { _file: file }))
    }
}

/// The one path of the file `database` names: resolved when it exists, else its directory
/// resolved (the file is about to be made there), else as given (the open reports why not).
fn canonical(database: &Path) -> PathBuf {
    if let Ok(path) = std::fs::canonicalize(database) {
        return path;
    }
    let parent = match database.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), database.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => database.to_owned(),
    }
}

/// Who holds the lock, from the pid its holder wrote into the file.
fn holder(lock_file: &Path) -> String {
    match std::fs::read_to_string(lock_file) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            // The holder locked the file but has not written its pid yet.
            Err(_) => "a process that is still starting".to_owned(),
        },
        Err(err) => format!("a process whose pid cannot be read: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_released_lock_can_be_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("baton.db");
        let db = db.to_str().unwrap();
        let first = DatabaseLock::acquire(db)
            .unwrap()
            .expect("a file is locked");
        let text = std::fs::read_to_string(format!("{db}.lock")).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file, so a second open in this process conflicts too.
        let err = DatabaseLock::acquire(db).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::Held { .. }), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(
            msg.contains("baton.db.lock") && msg.contains("--database"),
            "{msg}"
        );
        drop(first);
        assert!(DatabaseLock::acquire(db).unwrap().is_some());
    }

    #[test]
    fn a_symlink_or_another_spelling_of_the_path_finds_the_same_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("baton.db");
        let _held = DatabaseLock::acquire(db.to_str().unwrap())
            .unwrap()
            .expect("a file is locked");
        std::fs::write(&db, b"").unwrap();
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&db, &link).unwrap();
        let other_dir = dir.path().join("sub");
        std::fs::create_dir(&other_dir).unwrap();
        let spelled = other_dir.join("../baton.db");
        for path in [&link, &spelled] {
            let err = DatabaseLock::acquire(path.to_str().unwrap()).unwrap_err();
            assert!(
                matches!(err, LockError::Held { .. }),
                "{}: {err}",
                path.display()
            );
        }
    }

    #[test]
    fn memory_needs_no_lock_and_a_missing_directory_says_what_to_do() {
        assert!(DatabaseLock::acquire(":memory:").unwrap().is_none());
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("no/such/dir/baton.db");
        let err = DatabaseLock::acquire(db.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
        assert!(err.to_string().contains("writable"), "{err}");
    }
}
