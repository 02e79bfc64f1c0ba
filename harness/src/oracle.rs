//! Expected values computed with tools netprobe did not write: binutils' `nm` (a symbol's
//! virtual address) and `readelf -lW` (the PT_LOAD segments). The file offset of code at `vaddr`
//! is `vaddr - p_vaddr + p_offset` of the executable PT_LOAD that holds it (ELF gABI, program
//! header; the same rule as `netprobe-core/src/formulas.rs`).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn tool(prog: &str, args: &[&str], file: &Path) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .arg(file)
        .output()
        .with_context(|| format!("running {prog} (apt-get install binutils)"))?;
    if !out.status.success() {
        bail!(
            "{prog} {} failed: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// (p_offset, p_vaddr, p_filesz) of each executable PT_LOAD in `readelf -lW` output.
pub fn exec_segments(readelf_l: &str) -> Vec<(u64, u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    readelf_l
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // LOAD Offset VirtAddr PhysAddr FileSiz MemSiz Flg... Align
            if f.first() != Some(&"LOAD") || f.len() < 8 {
                return None;
            }
            let flags = f[6..f.len() - 1].concat();
            if !flags.contains('E') {
                return None;
            }
            Some((hex(f[1])?, hex(f[2])?, hex(f[4])?))
        })
        .collect()
}

/// The uprobe file offset of each of `functions` in the ELF `file`, from `nm` and `readelf`.
pub fn elf_offsets(file: &Path, functions: &[&str]) -> Result<BTreeMap<String, u64>> {
    let segments = exec_segments(&tool("readelf", &["-lW"], file)?);
    let nm = tool("nm", &[], file)?;
    let mut found = BTreeMap::new();
    for line in nm.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [addr, kind, name] = f[..] else { continue };
        if !matches!(kind, "T" | "t") || !functions.contains(&name) {
            continue;
        }
        let vaddr = u64::from_str_radix(addr, 16)?;
        let (off, seg_vaddr, _) = segments
            .iter()
            .find(|(_, v, size)| vaddr >= *v && vaddr - v < *size)
            .with_context(|| format!("{name} at {vaddr:#x} is in no executable PT_LOAD"))?;
        found.insert(name.to_string(), vaddr - seg_vaddr + off);
    }
    for f in functions {
        if !found.contains_key(*f) {
            bail!("nm lists no function {f} in {}", file.display());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_segments_from_readelf() {
        let text = "  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align\n\
  LOAD           0x000000 0x0000000000000000 0x0000000000000000 0x008020 0x008020 R   0x1000\n\
  LOAD           0x009000 0x0000000000009000 0x0000000000009000 0x079101 0x079101 R E 0x1000\n\
  LOAD           0x0ac518 0x00000000000ad518 0x00000000000ad518 0x005d58 0x00b548 RW  0x1000\n";
        assert_eq!(exec_segments(text), vec![(0x9000, 0x9000, 0x79101)]);
    }

    #[test]
    fn offsets_of_a_built_fixture() {
        let bin = fixtures::CProgram::new("harness_calls")
            .flags(&["-static", "-O2"])
            .build();
        let o = elf_offsets(&bin, &["np_harness_add", "np_harness_other"]).unwrap();
        // -static is ET_EXEC at 0x400000: offsets are below the address by that base.
        assert!(o["np_harness_add"] > 0 && o["np_harness_add"] < 0x400000);
        assert!(elf_offsets(&bin, &["no_such_function"]).is_err());
    }
}
