//! `/tmp/perfinfo-PID.map` (`ImageLoad;PATH;{MVID};BASE;` lines written by the .NET runtime's
//! src/coreclr/vm/perfinfo.cpp).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = netprobe_core::perfmap::parser::parse_perfinfo(data);
});
