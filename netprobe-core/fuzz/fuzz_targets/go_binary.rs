//! A whole Go ELF binary: pclntab location (section or magic scan), moduledata, buildinfo
//! (`debug/buildinfo/buildinfo.go`), the functions and their probe points.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::golang::GoBinary;

fuzz_target!(|data: &[u8]| {
    let Ok(Some(go)) = GoBinary::parse("fuzz.go", data) else {
        return;
    };
    let _ = go.version();
    let _ = go.abi();
    for f in go.functions().take(64) {
        let _ = go.code(&f);
        let _ = go.probe_points(&f);
        let _ = go.function_at(f.entry);
    }
});
