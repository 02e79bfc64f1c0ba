//! .NET single-file bundle manifests (the header after the bundle signature:
//! src/installer/managed/Microsoft.NET.HostModel/Bundle/Manifest.cs in dotnet/runtime), and
//! the assemblies stored in the bundle.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::bytes::FileBytes;
use netprobe_core::dotnet::bundle::{parser, Bundle};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = parser::parse(data);
    let Ok(Some(bundle)) =
        Bundle::from_bytes(Path::new("fuzz-bundle"), FileBytes::Owned(data.to_vec()))
    else {
        return;
    };
    let _ = bundle.runtimeconfig_json();
    for e in bundle.entries().iter().take(64) {
        let _ = bundle.placement(e);
        let _ = bundle.member_path(e);
        let _ = bundle.stored_bytes(e);
    }
    for (_, asm) in bundle.mapped_assemblies().into_iter().take(8) {
        if let Ok(asm) = asm {
            let _ = asm.methods();
        }
    }
});
