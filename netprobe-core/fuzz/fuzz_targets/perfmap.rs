//! perf map files (`/tmp/perf-PID.map`, crossgen `.r2rmap`/`.ni.r2rmap`): lines of
//! `START SIZE NAME` in hex (tools/perf/Documentation/jit-interface.txt in the kernel tree).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::perfmap::parser::{complete_lines, parse_map_line, parse_map_lines};

fuzz_target!(|data: &[u8]| {
    let _ = parse_map_lines(data);
    let complete = complete_lines(data);
    assert!(data.starts_with(complete));
    for line in complete.split(|&b| b == b'\n') {
        let _ = parse_map_line(line);
    }
});
