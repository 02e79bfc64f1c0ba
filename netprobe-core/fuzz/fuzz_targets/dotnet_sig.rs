//! ECMA-335 signature blobs alone (II.23.2: compressed integers, method and type signatures),
//! nesting included.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::dotnet::metadata::SigReader;

fuzz_target!(|data: &[u8]| {
    let _ = SigReader::new(data).method_sig(0);
    let _ = SigReader::new(data).type_sig(0);
    let _ = SigReader::new(data).skip_type(0);
    let mut r = SigReader::new(data);
    while r.uint().is_ok() {}
});
