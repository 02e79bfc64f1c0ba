//! Go's function table (`runtime/symtab.go`, `debug/gosym/pclntab.go` in golang/go): header,
//! function entries, names, pc-value tables and inline trees, from the table's bytes alone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::golang::pclntab::Pclntab;

fuzz_target!(|data: &[u8]| {
    let Ok(table) = Pclntab::parse(data) else {
        return;
    };
    let _ = table.end_of_text();
    for i in 0..table.len().min(512) {
        let _ = table.entry_fields(i);
        let Some(f) = table.function(i) else {
            continue;
        };
        let _ = table.find_index(f.entry);
        let _ = table.inline_ranges(i, 0, |v| {
            usize::try_from(v).ok().and_then(|v| data.get(v..))
        });
    }
});
