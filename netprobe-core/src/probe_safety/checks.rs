//! The checks of one probe against its file's tables (the table in `mod.rs`'s docs): the
//! executable range, the function planned or enclosing, its extent, the instruction boundary,
//! and each table's checks of a function's entry.

use super::tables::{go_pad, r2r_pad, CodeRange, Tables};
use super::units::{elf_unit, rf_unit, CodeUnit, UnitSource};
use super::{CodeFile, Passed, ProbeRequest, Refusal};
use crate::addr::{FileOffset, Rva, VirtAddr};
use crate::arch::{aarch64, Arch, Boundary};

impl CodeFile {
    pub(super) fn check_one(&self, t: &Tables<'_>, r: &ProbeRequest) -> Result<Passed, Refusal> {
        if let Tables::Elf { bundled, .. } = t {
            let inside = |&&((at, len), _): &&((u64, u64), Tables<'_>)| {
                r.offset.0 >= at && r.offset.0 - at < len
            };
            if let Some((_, member)) = bundled.iter().find(inside) {
                return self.check_one(member, r);
            }
        }
        let (ranges, format, arch) = match t {
            Tables::Elf { ranges, arch, .. } => (ranges, "segment (PT_LOAD with PF_X)", Ok(*arch)),
            Tables::Pe { ranges, arch, .. } => (ranges, "section", *arch),
        };
        let Some(range) = ranges.iter().find(|c| c.holds_offset(r.offset.0)) else {
            return Err(Refusal::NotExecutable { format });
        };
        let address = range.address + (r.offset.0 - range.offset);
        let unit = match r.planned_entry {
            Some(entry) => Some(self.planned_unit(t, ranges, entry)?),
            None => self.enclosing_unit(t, ranges, address),
        };
        let Some(unit) = unit else {
            return Ok(Passed { enclosing: None });
        };
        let end = unit.size.map(|z| unit.start.0.saturating_add(z));
        if r.offset.0 < unit.start.0 || end.is_some_and(|e| r.offset.0 >= e) {
            return Err(Refusal::OutsideFunction { unit });
        }
        if r.uretprobe && r.offset != unit.start {
            return Err(Refusal::UretprobeNotAtEntry { unit });
        }
        if let (
            Tables::Elf {
                go_misaligned: (failed, checked),
                ..
            },
            UnitSource::Pclntab,
        ) = (t, unit.source)
        {
            // A table whose entries mostly miss the code (a wrong text start shifts them all)
            // places no probe, even where one entry happens to look right.
            if *checked >= 8 && 2 * failed > *checked {
                return Err(Refusal::PclntabMisaligned {
                    failed: *failed,
                    checked: *checked,
                });
            }
        }
        if let (Tables::Elf { go: Some(go), .. }, UnitSource::Pclntab) = (t, unit.source) {
            let found = go.function_at(VirtAddr(address));
            if found.as_ref().map(|f| f.entry.0) != Some(unit.address) {
                return Err(Refusal::PclntabMismatch {
                    address,
                    planned: unit.name.clone(),
                    found: found.map(|f| f.name.to_string()),
                });
            }
        }
        // The bytes from the start to the probe, within the executable range holding the start.
        let start_range = ranges
            .iter()
            .find(|c| c.holds_offset(unit.start.0))
            .ok_or(Refusal::NotExecutable { format })?;
        let range_end = start_range.offset + start_range.len;
        let code = self
            .bytes()
            .get(unit.start.0 as usize..range_end.min(self.bytes().len() as u64) as usize)
            .unwrap_or(&[]);
        let target = (r.offset.0 - unit.start.0) as usize;
        let arch = arch.map_err(|machine| {
            Refusal::UnsupportedMachine(format!(
                "its PE machine is {machine:#06x}, and netprobe has instruction rules for x86_64 and aarch64 only, so it cannot check where a probe may go; probe an x64 or arm64 build of the assembly"
            ))
        })?;
        match arch.instruction_boundary(code, target) {
            Boundary::Reached => {}
            Boundary::Inside { start, len } => {
                return Err(Refusal::NotInstructionBoundary {
                    instruction: FileOffset(unit.start.0 + start as u64),
                    unit,
                    len,
                })
            }
            Boundary::Undecodable { at } => {
                return Err(Refusal::Undecodable {
                    at: FileOffset(unit.start.0 + at as u64),
                    unit,
                    arch,
                })
            }
        }
        if arch == Arch::Aarch64 {
            check_aarch64_instruction(code, target, &unit)?;
        }
        self.check_entry(t, ranges, &unit)?;
        Ok(Passed {
            enclosing: Some(unit),
        })
    }

    /// The function netprobe planned a probe for: the one of the file's tables that starts at
    /// `entry` (Go: the pclntab's; .NET: the RUNTIME_FUNCTION's; else the ELF symbol's).
    pub(super) fn planned_unit(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        entry: FileOffset,
    ) -> Result<CodeUnit, Refusal> {
        let missing = Refusal::NoFunctionAtEntry { entry };
        let Some(range) = ranges.iter().find(|c| c.holds_offset(entry.0)) else {
            return Err(missing);
        };
        let address = range.address + (entry.0 - range.offset);
        let unit = match t {
            Tables::Elf {
                go, elf_functions, ..
            } => go
                .as_ref()
                .and_then(|g| g.function_at(VirtAddr(address)))
                .filter(|f| f.entry.0 == address)
                .map(|f| CodeUnit {
                    name: f.name.to_string(),
                    source: UnitSource::Pclntab,
                    address,
                    start: entry,
                    size: Some(f.size()),
                })
                .or_else(|| {
                    self.elf_functions(elf_functions)
                        .at(address)
                        .max_by_key(|s| s.size)
                        .map(|s| elf_unit(s, entry))
                }),
            Tables::Pe {
                runtime_functions, ..
            } => {
                let found = runtime_functions
                    .binary_search_by_key(&address, |&(b, _)| b)
                    .ok();
                match found {
                    Some(i) => Some(rf_unit(runtime_functions, i, entry)),
                    None => return Err(Refusal::NoRuntimeFunction { rva: Rva(address) }),
                }
            }
        };
        unit.ok_or(missing)
    }

    /// The function of the file's tables that holds `address` (a raw offset's): the pclntab's
    /// (up to its code's end), else an ELF symbol with a size, else a RUNTIME_FUNCTION.
    fn enclosing_unit(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        address: u64,
    ) -> Option<CodeUnit> {
        let offset_of = |a: u64| {
            ranges
                .iter()
                .find(|c| c.holds_address(a))
                .map(|c| FileOffset(c.offset + (a - c.address)))
        };
        match t {
            Tables::Elf {
                go, elf_functions, ..
            } => {
                let from_go = go
                    .as_ref()
                    .and_then(|g| g.function_at(VirtAddr(address)))
                    .filter(|f| address < f.code_end().0)
                    .and_then(|f| {
                        Some(CodeUnit {
                            name: f.name.to_string(),
                            source: UnitSource::Pclntab,
                            address: f.entry.0,
                            start: offset_of(f.entry.0)?,
                            size: Some(f.size()),
                        })
                    });
                from_go.or_else(|| {
                    // The innermost sized symbol around the address (the one starting last).
                    self.elf_functions(elf_functions)
                        .all()
                        .iter()
                        .filter(|s| {
                            s.size > 0 && address >= s.vaddr.0 && address - s.vaddr.0 < s.size
                        })
                        .max_by_key(|s| (s.vaddr.0, std::cmp::Reverse(s.size)))
                        .and_then(|s| Some(elf_unit(s, offset_of(s.vaddr.0)?)))
                })
            }
            Tables::Pe {
                runtime_functions, ..
            } => {
                let i = runtime_functions
                    .partition_point(|&(b, _)| b <= address)
                    .checked_sub(1)?;
                let (_, end) = runtime_functions[i];
                if address >= end {
                    return None;
                }
                Some(rf_unit(
                    runtime_functions,
                    i,
                    offset_of(runtime_functions[i].0)?,
                ))
            }
        }
    }

    /// Checks of a function's entry itself, by the table it comes from.
    fn check_entry(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        unit: &CodeUnit,
    ) -> Result<(), Refusal> {
        match (t, unit.source) {
            (
                Tables::Elf {
                    go: Some(go), arch, ..
                },
                UnitSource::Pclntab,
            ) => {
                // The previous function's code, then INT3 up to this entry.
                let table = go.pclntab();
                let Some(i) = table.find_index(VirtAddr(unit.address)) else {
                    return Ok(());
                };
                let Some(prev) = i.checked_sub(1).and_then(|p| table.function(p)) else {
                    return Ok(());
                };
                let pad = go_pad(*arch);
                self.padding_before(ranges, unit, prev.code_end().0, |b| b == pad)
            }
            (
                Tables::Pe {
                    runtime_functions, ..
                },
                UnitSource::RuntimeFunction,
            ) => {
                let i = runtime_functions.partition_point(|&(b, _)| b < unit.address);
                let Some(&(_, prev_end)) = i.checked_sub(1).and_then(|p| runtime_functions.get(p))
                else {
                    return Ok(());
                };
                self.padding_before(ranges, unit, prev_end, r2r_pad)
            }
            (
                Tables::Elf {
                    sections,
                    elf_functions,
                    ..
                },
                UnitSource::ElfSymbol,
            ) => {
                let Some(sym) = self
                    .elf_functions(elf_functions)
                    .at(unit.address)
                    .find(|s| s.name == unit.name)
                else {
                    return Ok(());
                };
                // Special indices (SHN_ABS, SHN_COMMON, ...) name no section; files without
                // section headers have none to check.
                let Some(sec) = sections.get(sym.section).filter(|_| sym.section < 0xff00) else {
                    return Ok(());
                };
                let inside =
                    !sec.nobits && unit.address >= sec.addr && unit.address - sec.addr < sec.size;
                if !inside || !sec.executable {
                    return Err(Refusal::SymbolOutsideSection {
                        unit: unit.clone(),
                        section: if sec.name.is_empty() {
                            format!("#{}", sym.section)
                        } else {
                            sec.name.clone()
                        },
                        executable: sec.executable,
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The bytes from `prev_end` (the previous function's end, same address space) up to the
    /// unit's start must all be padding; a previous function ending after the start, or too far
    /// away (over 4 KiB: another section's gap), is not checked.
    fn padding_before(
        &self,
        ranges: &[CodeRange],
        unit: &CodeUnit,
        prev_end: u64,
        pad: impl Fn(u8) -> bool,
    ) -> Result<(), Refusal> {
        match self.gap_check(ranges, prev_end, unit.address, pad) {
            Some(Some((at, byte))) => Err(Refusal::EntryNotAfterPadding {
                unit: unit.clone(),
                at,
                byte,
            }),
            _ => Ok(()),
        }
    }

    /// The bytes between `prev_end` and `start` (addresses): `None` when not checkable (no gap,
    /// a gap over 4 KiB or outside the file's code), else the first byte that is not padding.
    pub(super) fn gap_check(
        &self,
        ranges: &[CodeRange],
        prev_end: u64,
        start: u64,
        pad: impl Fn(u8) -> bool,
    ) -> Option<Option<(FileOffset, u8)>> {
        let gap = start.checked_sub(prev_end)?;
        if gap == 0 || gap > 4096 {
            return None;
        }
        let range = ranges.iter().find(|c| c.holds_address(prev_end))?;
        let from = range.offset + (prev_end - range.address);
        let bytes = self.bytes().get(from as usize..(from + gap) as usize)?;
        Some(
            bytes
                .iter()
                .position(|&b| !pad(b))
                .map(|i| (FileOffset(from + i as u64), bytes[i])),
        )
    }
}

/// aarch64: the instruction at `target` (a byte index into `code`, which starts at the unit's
/// first byte; already a decoded word) is one the kernel's uprobes accept, and it lies in no
/// exclusive sequence (`crate::arch::aarch64`'s `uprobe_handling.rs` says why each is refused).
fn check_aarch64_instruction(code: &[u8], target: usize, unit: &CodeUnit) -> Result<(), Refusal> {
    let at = |i: usize| FileOffset(unit.start.0 + i as u64);
    let Some(instr) = code.get(target..).and_then(aarch64::decode) else {
        return Ok(());
    };
    if let Some(why) = aarch64::rejection(&instr) {
        return Err(Refusal::KernelRejects {
            unit: unit.clone(),
            at: at(target),
            instruction: instr.to_string(),
            why,
        });
    }
    if let Some(load) = aarch64::exclusive_sequence_before(code, target) {
        return Err(Refusal::InsideExclusiveSequence {
            unit: unit.clone(),
            at: at(target),
            load: at(load),
        });
    }
    Ok(())
}
