//! The tracefs backend: finding tracefs, writing probe lines, owning an instance, and reading its
//! ring buffers in binary; and everything else that speaks tracefs: the session names and the
//! removal of what a session left ([`cleanup`]), the process that removes it if netprobe is
//! killed ([`watchdog`]), finding the kernel's pids from inside a pid namespace ([`pidns`]), and
//! the equivalent shell script of a plan ([`dryrun`]).

pub mod cleanup;
pub mod decode;
pub mod dryrun;
pub mod events;
pub mod fetch;
pub mod filter;
pub mod format;
pub mod instance;
pub mod mount;
pub mod pidns;
pub mod probe;
pub mod ringbuf;
pub mod saved_tgids;
pub mod session;
pub mod watchdog;

pub use mount::Tracefs;
