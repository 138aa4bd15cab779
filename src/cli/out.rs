//! Lines the listing commands write to stdout. When the reader has gone (`baton transcript
//! --all | head`), the write fails with a broken pipe; that ends the command quietly with
//! success, as it ends other Unix tools, instead of a panic in `println!`.

use std::fmt;
use std::io::Write as _;

/// stdout was closed by its reader; the command has nothing left to do.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed by its reader")]
pub(super) struct StdoutClosed;

/// Writes one line to stdout.
pub(super) fn line(text: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(text).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(err) => Err(anyhow::Error::new(err).context("cannot write to stdout")),
    }
}

/// `println!` for the listing commands: `say!("{x}")?` ends quietly on a broken pipe.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::out::line(format_args!($($arg)*))
    };
}
pub(super) use say;
