//! The symbolizer's per-file index on mutated binaries (ELF symbols, Go tables, bundles,
//! ReadyToRun): build it from a file, then look offsets up.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::ImageIndex;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The file the index is built from, rewritten for each input: in `NETPROBE_FUZZ_SCRATCH`
/// (scripts/fuzz.sh points it into tmpfs when there is one, since rewriting a file on disk waits
/// for the disk, and removes it afterwards), else the temporary directory.
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::var_os("NETPROBE_FUZZ_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let _ = std::fs::create_dir_all(&dir);
        dir.join(format!("netprobe-fuzz-index-{}", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    if std::fs::write(path, data).is_err() {
        return;
    }
    if let Ok(index) = ImageIndex::build(path) {
        for off in [0u64, 1, 0x1000, data.len() as u64 / 2, data.len() as u64] {
            let _ = index.frames(path, FileOffset(off), off);
        }
    }
});
