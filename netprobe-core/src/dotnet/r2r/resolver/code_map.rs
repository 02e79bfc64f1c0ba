//! A method's code: its main body's RUNTIME_FUNCTION, the funclets that follow it up to the next
//! entry point (ILCompiler.Reflection.ReadyToRun's `CountRuntimeFunctions`), and its cold part
//! from HOT_COLD_MAP (pairs of cold, hot runtime function indices).

use super::super::types::{CodeRange, EntryKind, R2rMethod, RuntimeFunction};
use crate::addr::Rva;
use crate::dotnet::Assembly;

/// Code ranges of every method, given its main body's runtime function index.
pub(super) struct CodeMap<'a> {
    pub(super) functions: &'a [RuntimeFunction],
    pub(super) is_entry: Vec<bool>,
    /// hot runtime function index -> cold runtime function index
    pub(super) cold_of: Vec<(u32, u32)>,
}

impl CodeMap<'_> {
    pub(super) fn range(&self, asm: &Assembly, i: u32) -> Option<CodeRange> {
        let f = self.functions.get(i as usize)?;
        Some(CodeRange {
            rva: Rva(f.begin.into()),
            size: u64::from(f.end.saturating_sub(f.begin)),
            file_offset: asm.rva_to_file_offset(Rva(f.begin.into())),
        })
    }

    /// Runtime functions after `start` up to the next entry point.
    pub(super) fn followers(&self, start: u32) -> impl Iterator<Item = u32> + '_ {
        ((start as usize + 1)..self.functions.len())
            .take_while(|&j| !self.is_entry[j])
            .map(|j| j as u32)
    }

    pub(super) fn fragments(&self, asm: &Assembly, main: u32) -> Vec<CodeRange> {
        let mut out: Vec<CodeRange> = self
            .followers(main)
            .filter_map(|j| self.range(asm, j))
            .collect();
        if let Ok(k) = self.cold_of.binary_search_by_key(&main, |&(hot, _)| hot) {
            let cold = self.cold_of[k].1;
            out.extend(self.range(asm, cold));
            out.extend(self.followers(cold).filter_map(|j| self.range(asm, j)));
        }
        out
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    asm: &Assembly,
    code: &CodeMap<'_>,
    name: String,
    token: u32,
    entry: EntryKind,
    has_fixups: bool,
    runtime_function: u32,
    instance_entry: Option<usize>,
) -> Result<R2rMethod, String> {
    let main = code
        .range(asm, runtime_function)
        .ok_or("entry point beyond RUNTIME_FUNCTIONS")?;
    let funclets = code.fragments(asm, runtime_function);
    let total_size = main.size + funclets.iter().map(|f| f.size).sum::<u64>();
    Ok(R2rMethod {
        name,
        token,
        entry,
        has_fixups,
        runtime_function,
        rva: main.rva,
        size: main.size,
        file_offset: main.file_offset,
        funclets,
        total_size,
        instance_entry,
    })
}
