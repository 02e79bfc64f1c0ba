//! The probe-spec grammar of `netprobe trace/count` (`[r:][IMAGE:]FUNCTION [ARG...]`, the
//! module doc of netprobe-cli/src/spec.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::spec::ProbeSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = ProbeSpec::parse(text) {
        let _ = spec.location();
    }
});
