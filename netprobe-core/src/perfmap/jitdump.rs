//! The perf jitdump file a runtime writes beside its perf map (`/tmp/jit-PID.dump`; .NET with
//! `DOTNET_PerfMapEnabled=1` or `2`): the code-load records, with the names the runtime gives.
//!
//! Format: `tools/perf/Documentation/jitdump-specification.txt` in the Linux sources. A file
//! header (`magic` 0x4A695444 "JiTD" in the writer's byte order, `version`, `total_size` = header
//! size, `elf_mach`, `pad1`, `pid`, `timestamp`, `flags`), then records, each a header (`id`,
//! `total_size` = record size with its header, `timestamp`) and a body. `JIT_CODE_LOAD` (id 0):
//! `pid u32, tid u32, vma u64, code_addr u64, code_size u64, code_index u64`, the function name
//! NUL-terminated, then the code bytes. Other records are skipped by their size. .NET names
//! ReadyToRun methods whose code it starts using with a `[PreJIT]` suffix and JIT-compiled code
//! with its tier (`[OptimizedTier1]`, ...) when `DOTNET_PerfMapShowOptimizationTiers=1`.
//!
//! Every read is bounds-checked; a record cut off (the runtime still writing) ends the list.

use crate::bytes::{u32_at, u64_at};
use serde::Serialize;

/// `JITHEADER_MAGIC` as a little-endian writer stores it.
const MAGIC: u32 = 0x4A69_5444;
const JIT_CODE_LOAD: u32 = 0;

/// One `JIT_CODE_LOAD` record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JitCodeLoad {
    pub pid: u32,
    pub code_addr: u64,
    pub code_size: u64,
    pub name: String,
}

/// The code-load records of a jitdump file, in file order; `None` when `bytes` do not start with
/// a little-endian jitdump header.
pub fn parse_jitdump(bytes: &[u8]) -> Option<Vec<JitCodeLoad>> {
    if u32_at(bytes, 0)? != MAGIC {
        return None;
    }
    let mut at = usize::try_from(u32_at(bytes, 8)?).ok()?;
    let mut out = Vec::new();
    while let (Some(id), Some(size)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) {
        let size = usize::try_from(size).ok()?;
        let Some(record) = at.checked_add(size).and_then(|end| bytes.get(at..end)) else {
            break;
        };
        if size < 16 {
            break;
        }
        if id == JIT_CODE_LOAD {
            if let Some(load) = code_load(record) {
                out.push(load);
            }
        }
        at += size;
    }
    Some(out)
}

fn code_load(r: &[u8]) -> Option<JitCodeLoad> {
    let pid = u32_at(r, 16)?;
    let code_addr = u64_at(r, 32)?;
    let code_size = u64_at(r, 40)?;
    let name = r.get(56..)?;
    let name = &name[..memchr::memchr(0, name)?];
    Some(JitCodeLoad {
        pid,
        code_addr,
        code_size,
        name: String::from_utf8_lossy(name).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(addr: u64, size: u64, name: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&7u32.to_le_bytes());
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(&addr.to_le_bytes());
        body.extend_from_slice(&addr.to_le_bytes());
        body.extend_from_slice(&size.to_le_bytes());
        body.extend_from_slice(&1u64.to_le_bytes());
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend(std::iter::repeat_n(0x90, size as usize));
        let mut r = Vec::new();
        r.extend_from_slice(&JIT_CODE_LOAD.to_le_bytes());
        r.extend_from_slice(&((16 + body.len()) as u32).to_le_bytes());
        r.extend_from_slice(&0u64.to_le_bytes());
        r.extend(body);
        r
    }

    fn header() -> Vec<u8> {
        let mut h = Vec::new();
        for w in [MAGIC, 1, 40, 62, 0, 7] {
            h.extend_from_slice(&w.to_le_bytes());
        }
        h.extend_from_slice(&[0; 16]);
        h
    }

    #[test]
    fn reads_code_loads_and_stops_at_a_cut_record() {
        let mut f = header();
        f.extend(record(0x7f00_0000_1000, 4, "void [A] N.T::M()[PreJIT]"));
        f.extend(record(
            0x7f00_0000_2000,
            2,
            "int32 [A] N.T::F(int32)[OptimizedTier1]",
        ));
        let loads = parse_jitdump(&f).unwrap();
        assert_eq!(loads.len(), 2);
        assert_eq!(loads[0].code_addr, 0x7f00_0000_1000);
        assert_eq!(loads[1].name, "int32 [A] N.T::F(int32)[OptimizedTier1]");
        f.truncate(f.len() - 3);
        assert_eq!(parse_jitdump(&f).unwrap().len(), 1);
        assert_eq!(parse_jitdump(b"not a jitdump"), None);
    }

    proptest! {
        /// Hostile bytes after a valid header never panic.
        #[test]
        fn arbitrary_records_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut f = header();
            f.extend(tail);
            let _ = parse_jitdump(&f);
        }
    }
}
