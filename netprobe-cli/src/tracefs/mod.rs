//! The tracefs backend: finding tracefs, writing probe lines, owning an instance, and reading its
//! ring buffers in binary.

pub mod format;
pub mod instance;
pub mod mount;
pub mod probe;
pub mod ringbuf;

pub use mount::Tracefs;
