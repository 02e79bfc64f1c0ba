//! jitdump files (tools/perf/Documentation/jitdump-specification.txt in the kernel tree).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = netprobe_core::perfmap::jitdump::parse_jitdump(data);
});
