//! `/proc/PID/maps`: every field, parsed from bytes and rendered back as the kernel prints it.

pub mod parser;
pub mod types;

pub use parser::{parse_line, parse_maps, render_maps, MapsParseError};
pub use types::{Device, MapPath, MapsEntry, Perms};
