//! Bytes as drained from a `netprobe profile` sampler's ring buffer: `perf_event_header`s and
//! sample bodies with a callchain and a user-stack copy (include/uapi/linux/perf_event.h).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::backend::perf_event::record::{decode, Record};

fuzz_target!(|data: &[u8]| {
    for r in decode(data) {
        if let Record::Sample { ips, stack, .. } = r {
            assert!(ips.len() * 8 <= data.len() && stack.len() <= data.len());
        }
    }
});
