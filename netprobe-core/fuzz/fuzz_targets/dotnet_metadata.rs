//! ECMA-335 metadata on its own (ECMA-335 II.24: root, streams, #~ tables, heaps) and the
//! method signatures of its MethodDef rows (II.23.2), printed ildasm and reflection style.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::dotnet::metadata::{table, Metadata, MetadataLayout};

fuzz_target!(|data: &[u8]| {
    let Ok(layout) = MetadataLayout::parse(data) else {
        return;
    };
    let md = Metadata::new(&layout, data).with_validated_strings();
    let _ = md.assembly_name();
    let _ = md.mvid();
    for rid in 1..=md.rows(table::TYPE_DEF).min(64) {
        let _ = md.type_def(rid);
    }
    for rid in 1..=md.rows(table::TYPE_REF).min(64) {
        let _ = md.type_ref(rid);
    }
    for rid in 1..=md.rows(table::MEMBER_REF).min(64) {
        let _ = md.member_ref(rid);
    }
    for rid in 1..=md.rows(table::METHOD_DEF).min(256) {
        if let Some(row) = md.method_def(rid) {
            let _ = md.method_sig(row.signature);
        }
    }
});
