//! The tracefs backend: finding tracefs, writing probe lines, owning an instance, and reading its
//! ring buffers in binary.

pub mod decode;
pub mod events;
pub mod fetch;
pub mod filter;
pub mod format;
pub mod instance;
pub mod mount;
pub mod probe;
pub mod ringbuf;
pub mod session;

pub use mount::Tracefs;
