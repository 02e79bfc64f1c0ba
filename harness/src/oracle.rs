//! Expected values computed with tools netprobe did not write (`nm`, `readelf`): the functions'
//! uprobe file offsets the kernel-matrix checks compare netprobe's with. The computation is
//! `fixtures::binutils`, shared with the tests that check netprobe's offsets the same way.

pub use fixtures::binutils::{elf_offsets, exec_segments};
