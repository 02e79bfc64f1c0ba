//! A .NET assembly end to end: PE headers and sections, the CLI header, ECMA-335 metadata
//! (ECMA-335 II.24), the ReadyToRun header, sections, RUNTIME_FUNCTIONS and method entry points
//! (docs/design/coreclr/botr/readytorun-format.md in dotnet/runtime), method names and
//! signatures as `netprobe symbols` prints them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::dotnet::Assembly;

fuzz_target!(|data: &[u8]| {
    let Ok(asm) = Assembly::parse("fuzz.dll", data.to_vec()) else {
        return;
    };
    let _ = asm.name();
    let _ = asm.mvid();
    let _ = asm.method_def_names();
    if let Ok(methods) = asm.methods() {
        for m in methods.iter().take(64) {
            let _ = asm.details(m);
        }
    }
});
