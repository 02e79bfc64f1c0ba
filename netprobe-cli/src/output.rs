//! Writing results: buffered stdout that treats a closed pipe (`netprobe symbols X | head`) as the
//! reader being done, not as an error.

use std::io::{self, BufWriter, Stdout, Write};

/// Buffered standard output.
pub struct Out {
    inner: BufWriter<Stdout>,
}

impl Default for Out {
    fn default() -> Self {
        Out::new()
    }
}

impl Out {
    pub fn new() -> Out {
        Out {
            inner: BufWriter::with_capacity(64 * 1024, io::stdout()),
        }
    }

    /// Writes one line (a newline is added). Control characters in it are escaped
    /// ([`crate::printable`]): a line holds names from files and processes, and a newline or an
    /// escape sequence in one of them must not reach the terminal.
    pub fn line(&mut self, s: &str) -> io::Result<()> {
        self.inner
            .write_all(crate::printable::printable(s).as_bytes())?;
        self.inner.write_all(b"\n")
    }

    /// Writes one JSON value as a line (JSON Lines). A failed write keeps its kind
    /// (`From<serde_json::Error> for io::Error` unwraps it; `io::Error::other` would hide a
    /// closed pipe from [`is_broken_pipe`]).
    pub fn json<T: serde::Serialize>(&mut self, v: &T) -> io::Result<()> {
        serde_json::to_writer(&mut self.inner, v).map_err(io::Error::from)?;
        self.inner.write_all(b"\n")
    }

    /// `write!`/`writeln!` support, without an intermediate `String`.
    pub fn write_fmt(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        self.inner.write_fmt(args)
    }

    /// Writes `bytes` as they are.
    pub fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Whether an I/O error means "the reader closed the pipe": then stop quietly with success.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
