//! ELF headers, program headers, sections and function symbols (`.symtab`, `.dynsym`) with
//! their file offsets; System V gABI, "Object Files".
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::bytes::FileBytes;
use netprobe_core::elf::ElfFile;
use netprobe_core::symbol::SymbolSource;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.elf");
    let Ok(file) = ElfFile::from_bytes(path, FileBytes::Owned(data.to_vec())) else {
        return;
    };
    let _ = file.segments();
    let _ = file.sections();
    if let Ok(view) = file.view() {
        for sh in view.section_headers.iter().take(256) {
            let _ = view.section_bytes(sh);
            let _ = view.section_name(sh);
        }
        // One name through `.gnu.hash` (and the names its first bytes would hash as).
        let name = data.get(..data.len().min(8)).unwrap_or_default();
        let _ = view.functions_named_where(path, &[b"main", name], &|_, _| true);
    }
    if let Ok(symbols) = file.symbols() {
        for s in symbols.iter().take(64) {
            let _ = file.explain(netprobe_core::addr::VirtAddr(s.address.value()));
        }
    }
});
