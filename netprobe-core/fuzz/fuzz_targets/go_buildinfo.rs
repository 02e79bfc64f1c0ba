//! Go build information blob (`\xff Go buildinf:`; `debug/buildinfo/buildinfo.go` in
//! golang/go), pre-1.18 pointer form and 1.18+ inline strings, and version strings.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::elf::segments::{LoadSegment, LoadSegments};
use netprobe_core::golang::buildinfo::{BuildInfo, GoVersion};

fuzz_target!(|data: &[u8]| {
    // One segment mapping the whole input at 0x400000, so pre-1.18 pointers can resolve.
    let segments = LoadSegments(vec![LoadSegment {
        vaddr: 0x40_0000,
        memsz: data.len() as u64,
        offset: 0,
        filesz: data.len() as u64,
        executable: false,
    }]);
    if let Some(blob) = BuildInfo::locate(data, None) {
        if let Some(info) = BuildInfo::parse(blob, data, &segments) {
            let _ = info.version();
        }
    }
    let _ = GoVersion::parse(&String::from_utf8_lossy(data));
});
