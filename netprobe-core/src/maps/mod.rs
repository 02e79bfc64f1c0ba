//! `/proc/PID/maps`: every field, parsed from bytes and rendered back as the kernel prints it;
//! and [`recorded`], mappings as the kernel announced them while a session ran.

pub mod parser;
pub mod recorded;
pub mod types;

pub use parser::{parse_line, parse_maps, render_maps, MapsParseError};
pub use recorded::{mmap_record_entry, MmapRecord, RecordedMaps, RecordedView};
pub use types::{Device, MapPath, MapsEntry, Perms};
