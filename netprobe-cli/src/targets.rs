//! Resolution of what users type to file offsets: the core's resolver (`netprobe_core::resolve`).

pub use netprobe_core::resolve::{resolve_file, resolve_in_process, ProbeTarget};
