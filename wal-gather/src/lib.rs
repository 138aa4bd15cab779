//! An SQLite VFS that writes each commit's write-ahead-log frames in one system call.
//!
//! SQLite writes a WAL frame in two `pwrite`s, its 24-byte header and then its page, and a
//! commit is as many frames as pages it changed: in baton's benchmarks 30 frames and 60 system
//! calls for one bot-to-bot round trip, a fifth of the store writer's time in the kernel. This
//! VFS is the default one (`unix`) with one change: the frames a transaction appends to the log
//! are gathered in memory and written together when its commit frame is complete, before
//! SQLite goes on to publish the commit. So when a commit returns, its frames are in the file
//! exactly as without this VFS, and what a `kill -9`, a power cut or another connection sees is
//! unchanged.
//!
//! Only appends are gathered. Whatever else touches the log first writes out what is gathered:
//! a read (SQLite reading back a page it spilled mid-transaction), a sync, a truncation, a size
//! query, a file control, a close, and any write that does not continue the gathered bytes
//! (checksums rewritten in place, the log starting over from its header). The log of a database
//! that is not power-safe (its `psow=0` URI parameter, or a device without
//! `SQLITE_IOCAP_POWERSAFE_OVERWRITE`), where SQLite pads a commit to the sector and may split a
//! frame around a sync, is not gathered at all. Database files, journals and the
//! shared-memory index are opened by the default VFS untouched.
//!
//! [`register`] once, then open connections with the VFS name it returns.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use libsqlite3_sys as ffi;

/// The name the VFS is registered under.
const NAME: &CStr = c"baton-wal-gather";

/// The most bytes gathered before they are written anyway: a commit larger than this (a
/// migration, a large spill) is written in pieces. It is what the default VFS writes in one
/// call: its `seekAndWrite` keeps only the low 17 bits of a length, so a longer write comes
/// back short, as if the disk were full.
const MAX_GATHERED: usize = (1 << 17) - 1;

/// SQLite's WAL frame header: 24 bytes, the commit's database size (non-zero only in a
/// transaction's last frame) at bytes 4 to 8, big-endian.
const FRAME_HEADER: usize = 24;

/// The default VFS that this one wraps (set once, by [`register`]).
static DEFAULT: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

/// Write calls SQLite made on gathered logs, and the ones that reached the file.
static ASKED: AtomicU64 = AtomicU64::new(0);
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Registers the VFS (once per process; later calls return the first answer). `None` when
/// SQLite has no default VFS to wrap or refuses the registration; a caller then opens with the
/// default VFS, which is correct, only slower.
pub fn register() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vfs_find` with a null name returns the default VFS or null; it
        // initialises the library first if needed.
        let default = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
        if default.is_null() {
            return false;
        }
        // SAFETY: a registered VFS lives as long as the process; this one is only read.
        let mut vfs = unsafe { *default };
        let size = usize::try_from(vfs.szOsFile).unwrap_or(0);
        let Ok(sized) = c_int::try_from(REAL_AT + size) else {
            return false;
        };
        vfs.szOsFile = sized;
        vfs.zName = NAME.as_ptr();
        vfs.pNext = ptr::null_mut();
        vfs.xOpen = Some(open);
        DEFAULT.store(default, Ordering::Release);
        // Registered for the life of the process, as SQLite requires.
        let vfs: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(vfs));
        // SAFETY: `vfs` is a valid, complete VFS that is never freed; not made the default.
        unsafe { ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK }
    });
    registered.then_some(NAME)
}

/// Write calls on gathered logs since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writes {
    /// The writes SQLite asked for.
    pub asked: u64,
    /// The `pwrite`s that reached the file for them.
    pub written: u64,
}

/// How many writes were asked for and made so far (for benchmarks and tests).
pub fn writes() -> Writes {
    Writes {
        asked: ASKED.load(Ordering::Relaxed),
        written: WRITTEN.load(Ordering::Relaxed),
    }
}

/// A log file opened by this VFS. SQLite allocates `szOsFile` bytes for it: this struct, and
/// the default VFS's own file at [`REAL_AT`] bytes in.
#[repr(C)]
struct GatherFile {
    /// What SQLite sees; must come first.
    base: ffi::sqlite3_file,
    /// The default VFS's file, inside the same allocation.
    real: *mut ffi::sqlite3_file,
    /// What is gathered, owned and freed at close; null when the log is not gathered.
    log: *mut Gathered,
}

/// Where the default VFS's file starts inside a [`GatherFile`]'s allocation (16-byte aligned).
const REAL_AT: usize = std::mem::size_of::<GatherFile>().next_multiple_of(16);

/// The bytes gathered for one log, and where they go.
#[derive(Default)]
struct Gathered {
    bytes: Vec<u8>,
    /// The file offset of `bytes[0]`.
    at: i64,
    /// The end of the furthest byte written or gathered since the log last started over: a
    /// write before it rewrites what is there and is not gathered.
    end: i64,
    /// The last write was a commit frame's header: its page comes next, and then the commit's
    /// frames are written out.
    commit_header: bool,
}

/// The methods of a log opened by this VFS: reads, writes and every other call that looks at
/// the file write out what is gathered first; the shared-memory and locking calls (never made
/// on a log) pass through.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// Calls `method` of the default VFS's file `real` with `args`: `None` if it has none.
macro_rules! real_call {
    ($real:expr, $method:ident($($arg:expr),*)) => {{
        let real: *mut ffi::sqlite3_file = $real;
        // SAFETY: the default VFS opened `real` and set its methods, which live as long as the
        // library.
        let method = unsafe { (*(*real).pMethods).$method };
        // SAFETY: called as SQLite would call it, with the arguments SQLite gave us.
        method.map(|method| unsafe { method(real $(, $arg)*) })
    }};
}

/// Opens through the default VFS; a write-ahead log gets [`METHODS`], and is gathered if its
/// database is power-safe.
unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let default = DEFAULT.load(Ordering::Acquire);
    // SAFETY: set before this VFS was registered, and a registered VFS is never freed.
    let Some(default_open) = (unsafe { (*default).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: `file` has room for the default VFS's file (our `szOsFile` is larger); the
        // file opened there is the default VFS's own, with its own methods.
        return unsafe { default_open(default, name, file, flags, out_flags) };
    }
    // SAFETY: SQLite allocated `szOsFile` = `REAL_AT` + the default's size bytes at `file`.
    let real = unsafe { file.cast::<u8>().add(REAL_AT) }.cast::<ffi::sqlite3_file>();
    // SAFETY: `real` has the default VFS's `szOsFile` bytes to itself.
    let rc = unsafe { default_open(default, name, real, flags, out_flags) };
    let opened = rc == ffi::SQLITE_OK;
    // The database's `psow` URI parameter decides whether SQLite pads commits, but the
    // default VFS does not apply it to the log it opens: asked here, on the log's name, which
    // carries the database's parameters.
    // SAFETY: `name` is the filename SQLite passed to open the log.
    let psow = unsafe { ffi::sqlite3_uri_boolean(name, c"psow".as_ptr(), 1) } != 0;
    let power_safe = opened
        && psow
        && real_call!(real, xDeviceCharacteristics()).unwrap_or(0)
            & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
            != 0;
    let gathered = GatherFile {
        // SQLite closes nothing whose open failed.
        base: ffi::sqlite3_file {
            pMethods: if opened { &METHODS } else { ptr::null() },
        },
        real,
        log: if power_safe {
            Box::into_raw(Box::default())
        } else {
            ptr::null_mut()
        },
    };
    // SAFETY: `file` is at least a `GatherFile` in size, SQLite's to hand to us uninitialised.
    unsafe { file.cast::<GatherFile>().write(gathered) };
    rc
}

/// The default VFS's file behind `file`, and what is gathered for it (`None`: not gathered).
///
/// # Safety
/// `file` was opened by [`open`] as a log and is not closed; SQLite makes one call on a file at
/// a time.
unsafe fn parts<'a>(
    file: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, Option<&'a mut Gathered>) {
    let file = file.cast::<GatherFile>();
    // SAFETY: `open` wrote a `GatherFile` there.
    let (real, log) = unsafe { ((*file).real, (*file).log) };
    // SAFETY: `log` is null or the box `open` made, and no other call is using it.
    (real, unsafe { log.as_mut() })
}

/// Writes what is gathered to `real` in one call.
///
/// # Safety
/// `real` is the default VFS's open file that `gathered` belongs to.
unsafe fn write_out(real: *mut ffi::sqlite3_file, gathered: Option<&mut Gathered>) -> c_int {
    let Some(gathered) = gathered.filter(|g| !g.bytes.is_empty()) else {
        return ffi::SQLITE_OK;
    };
    // At most `MAX_GATHERED` bytes.
    let amount = c_int::try_from(gathered.bytes.len()).unwrap_or(c_int::MAX);
    let data = gathered.bytes.as_ptr().cast::<c_void>();
    let rc = real_call!(real, xWrite(data, amount, gathered.at)).unwrap_or(ffi::SQLITE_IOERR_WRITE);
    WRITTEN.fetch_add(1, Ordering::Relaxed);
    gathered.bytes.clear();
    rc
}

/// Gathers an append to the log; writes out at the end of a commit frame, and first whenever
/// the write does not continue what is gathered.
unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite calls this only on a file `open` opened as a log.
    let (real, gathered) = unsafe { parts(file) };
    let Some(g) = gathered else {
        return real_call!(real, xWrite(data, amount, offset)).unwrap_or(ffi::SQLITE_IOERR_WRITE);
    };
    ASKED.fetch_add(1, Ordering::Relaxed);
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: SQLite passes `amount` readable bytes at `data`.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    let ends = offset + ffi::sqlite3_int64::from(amount);
    // This write is the page of a commit frame whose header came just before.
    let ends_commit = std::mem::replace(
        &mut g.commit_header,
        len == FRAME_HEADER && bytes[4..8] != [0; 4],
    );
    if offset == 0 {
        // The log starts over with its header: all that follows is new.
        // SAFETY: `real` is `g`'s file.
        let rc = unsafe { write_out(real, Some(&mut *g)) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        g.end = 0;
    }
    let gathered_end = g.at + i64::try_from(g.bytes.len()).unwrap_or(i64::MAX);
    let continues = if g.bytes.is_empty() {
        offset >= g.end
    } else {
        offset == gathered_end
    };
    if !continues || g.bytes.len() + len > MAX_GATHERED {
        // SAFETY: as above.
        let rc = unsafe { write_out(real, Some(&mut *g)) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    g.end = g.end.max(ends);
    if !continues {
        // Rewrites what is already in the file (a checksum, a page of this transaction).
        WRITTEN.fetch_add(1, Ordering::Relaxed);
        return real_call!(real, xWrite(data, amount, offset)).unwrap_or(ffi::SQLITE_IOERR_WRITE);
    }
    if g.bytes.is_empty() {
        g.at = offset;
    }
    g.bytes.extend_from_slice(bytes);
    if ends_commit {
        // SAFETY: as above.
        unsafe { write_out(real, Some(g)) }
    } else {
        ffi::SQLITE_OK
    }
}

/// Writes out what is gathered, then frees it and closes the file.
unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this only on a file `open` opened as a log, once.
    let (real, gathered) = unsafe { parts(file) };
    // SAFETY: `real` is `gathered`'s file.
    let written = unsafe { write_out(real, gathered) };
    // SAFETY: as in `parts`; the box is taken out so that nothing uses it again.
    let log = unsafe { std::mem::replace(&mut (*file.cast::<GatherFile>()).log, ptr::null_mut()) };
    if !log.is_null() {
        // SAFETY: made by `Box::into_raw` in `open`, freed only here.
        drop(unsafe { Box::from_raw(log) });
    }
    let closed = real_call!(real, xClose()).unwrap_or(ffi::SQLITE_OK);
    if written != ffi::SQLITE_OK {
        written
    } else {
        closed
    }
}

/// The calls that look at the file: what is gathered is written out first, then the call
/// passes through.
macro_rules! after_write_out {
    ($(#[$doc:meta])* $name:ident, $method:ident($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls this only on a file `open` opened as a log.
            let (real, gathered) = unsafe { parts(file) };
            // SAFETY: `real` is `gathered`'s file.
            let rc = unsafe { write_out(real, gathered) };
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            real_call!(real, $method($($arg),*)).unwrap_or(ffi::SQLITE_IOERR)
        }
    };
}

/// The calls that never see the log's bytes: straight through.
macro_rules! pass_through {
    ($(#[$doc:meta])* $name:ident, $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty, $none:expr) => {
        $(#[$doc])*
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: SQLite calls this only on a file `open` opened as a log.
            let (real, _) = unsafe { parts(file) };
            real_call!(real, $method($($arg),*)).unwrap_or($none)
        }
    };
}

after_write_out!(
    /// A read may be of a page this transaction spilled to the log.
    read, xRead(buf: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64)
);
after_write_out!(sync, xSync(flags: c_int));
after_write_out!(file_size, xFileSize(size: *mut ffi::sqlite3_int64));
after_write_out!(file_control, xFileControl(op: c_int, arg: *mut c_void));

/// Writes out what is gathered, then truncates: a later write below the new size is an
/// append again.
unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    // SAFETY: SQLite calls this only on a file `open` opened as a log.
    let (real, mut gathered) = unsafe { parts(file) };
    // SAFETY: `real` is `gathered`'s file.
    let rc = unsafe { write_out(real, gathered.as_deref_mut()) };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if let Some(g) = gathered {
        g.end = g.end.min(size);
    }
    real_call!(real, xTruncate(size)).unwrap_or(ffi::SQLITE_IOERR_TRUNCATE)
}

pass_through!(lock, xLock(level: c_int) -> c_int, ffi::SQLITE_IOERR_LOCK);
pass_through!(unlock, xUnlock(level: c_int) -> c_int, ffi::SQLITE_IOERR_UNLOCK);
pass_through!(
    check_reserved_lock,
    xCheckReservedLock(out: *mut c_int) -> c_int,
    ffi::SQLITE_IOERR_CHECKRESERVEDLOCK
);
pass_through!(sector_size, xSectorSize() -> c_int, 4096);
pass_through!(device_characteristics, xDeviceCharacteristics() -> c_int, 0);
pass_through!(
    shm_map,
    xShmMap(page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int,
    ffi::SQLITE_IOERR_SHMMAP
);
pass_through!(
    shm_lock,
    xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int,
    ffi::SQLITE_IOERR_SHMLOCK
);
pass_through!(shm_barrier, xShmBarrier() -> (), ());
pass_through!(shm_unmap, xShmUnmap(delete: c_int) -> c_int, ffi::SQLITE_OK);
pass_through!(
    fetch,
    xFetch(offset: ffi::sqlite3_int64, amount: c_int, out: *mut *mut c_void) -> c_int,
    ffi::SQLITE_IOERR
);
pass_through!(
    unfetch,
    xUnfetch(offset: ffi::sqlite3_int64, page: *mut c_void) -> c_int,
    ffi::SQLITE_IOERR
);
