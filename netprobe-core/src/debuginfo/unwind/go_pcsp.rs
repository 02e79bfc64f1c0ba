//! One unwinding step through a Go function by its `pcsp` table: the Go runtime's own way
//! (`runtime/traceback.go`, `funcspdelta` in `runtime/symtab.go`), exact at every instruction.
//!
//! A Go function's `pcsp` pc-value table gives, per pc, how far SP is below its value at the
//! function's entry, where the return address was pushed by the call. So at pc with delta `d`,
//! the return address is at `rsp + d` and the caller's rsp is `rsp + d + 8`. Functions with a
//! frame save the caller's rbp just below the return address (amd64 frame pointers since Go 1.7,
//! `cmd/internal/obj/x86/obj6.go`), which the next frame (cgo's C code, a frame-pointer step)
//! may need.

use super::registers::{Registers, StackMemory, RA, RBP, RSP};
use crate::bytes::FileBytes;
use crate::golang::{GoBinary, Pclntab};
use std::collections::HashMap;
use std::sync::Mutex;

/// Functions whose runs are kept before the cache starts over.
const MAX_CACHED_FUNCTIONS: usize = 1 << 14;

/// SP-delta runs of one function: `(start, end, delta)` as link-time addresses.
type Runs = Vec<(u64, u64, i32)>;

/// A Go image's function table, for unwinding.
pub struct GoStackTable {
    bytes: FileBytes,
    table_offset: usize,
    text_start: u64,
    /// Per function entry: its runs (`None`: its table is missing or malformed).
    functions: Mutex<HashMap<u64, Option<Runs>>>,
}

impl std::fmt::Debug for GoStackTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoStackTable")
            .field("table_offset", &self.table_offset)
            .finish()
    }
}

impl GoStackTable {
    /// The function table of the Go executable `bytes`; `None` when it is not one.
    pub fn new(path: &std::path::Path, bytes: FileBytes) -> Option<GoStackTable> {
        let (table_offset, text_start) = {
            let bin = GoBinary::parse(path, &bytes).ok()??;
            let loc = bin.pclntab_location();
            (usize::try_from(loc.file_offset.0).ok()?, loc.text_start)
        };
        // Validated once here; each lookup then reads the header only.
        Pclntab::parse(bytes.get(table_offset..)?).ok()?;
        Some(GoStackTable {
            bytes,
            table_offset,
            text_start,
            functions: Mutex::new(HashMap::new()),
        })
    }

    fn table(&self) -> Option<Pclntab<'_>> {
        let data = self.bytes.get(self.table_offset..)?;
        Some(
            Pclntab::parse_validated(data)
                .ok()?
                .with_text_start(self.text_start),
        )
    }

    /// The SP delta at link-time address `pc`; `None` when no function holds it.
    fn sp_delta(&self, pc: u64) -> Option<i32> {
        let table = self.table()?;
        let i = table.find_index(crate::addr::VirtAddr(pc))?;
        let f = table.function(i)?;
        let entry = f.entry.0;
        let mut cache = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED_FUNCTIONS {
            cache.clear();
        }
        let runs = cache.entry(entry).or_insert_with(|| {
            let rec = table.func_record(i)?;
            let off = table.record_field(rec, 4)?;
            let runs = table.pc_value_runs(off, f.padded_size())?;
            Some(
                runs.into_iter()
                    .map(|(s, e, v)| (entry + s, entry + e, v))
                    .collect(),
            )
        });
        let runs = runs.as_ref()?;
        runs.iter()
            .find(|(s, e, _)| (*s..*e).contains(&pc))
            .map(|r| r.2)
    }

    /// Whether a Go function holds link-time address `pc`.
    pub fn covers(&self, pc: u64) -> bool {
        self.table()
            .and_then(|t| t.find_index(crate::addr::VirtAddr(pc)))
            .is_some()
    }

    /// One step from a frame at link-time `lookup_pc` (a return address minus one for outer
    /// frames) with registers `regs`. `None` when no function or no delta covers the pc, or the
    /// return address lies outside the copied stack.
    pub fn step(
        &self,
        lookup_pc: u64,
        regs: &Registers,
        stack: &dyn StackMemory,
    ) -> Option<Registers> {
        let delta = self.sp_delta(lookup_pc)?;
        let rsp = regs.rsp()?;
        let ra_at = rsp.checked_add_signed(i64::from(delta))?;
        let mut caller = *regs;
        caller.set(RA, Some(stack.read_u64(ra_at)?));
        caller.set(RSP, ra_at.checked_add(8));
        if delta >= 8 {
            caller.set(RBP, stack.read_u64(ra_at - 8));
        }
        Some(caller)
    }
}
