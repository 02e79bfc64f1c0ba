//! Turns a ReadyToRun image's entry points into named methods with code ranges and file offsets.
//!
//! - METHODDEF_ENTRYPOINTS: MethodDef row -> RUNTIME_FUNCTIONS index (readytorun-format.md).
//! - INSTANCE_METHOD_ENTRYPOINTS: a method signature (flags, owner type, token, instantiation)
//!   followed by the same entry-point record (ILCompiler.Reflection.ReadyToRun's reader reads it
//!   in this order: flags, module if UpdateContext, owner type, token, method instantiation,
//!   constrained type, entry point).
//! - A method's funclets are the RUNTIME_FUNCTIONS that follow its main body up to the next
//!   entry point (the same rule as ILCompiler.Reflection.ReadyToRun's `CountRuntimeFunctions`);
//!   cold parts come from HOT_COLD_MAP (pairs of cold, hot runtime function indices).

use super::parser::{entry_point, instance_entry_positions, method_def_entry_points};
use super::types::{
    method_sig_flags as msf, section, CodeRange, EntryKind, MethodDetails, R2rMethod,
    RuntimeFunction,
};
use crate::addr::Rva;
use crate::bytes::{u32_at, us};
use crate::dotnet::metadata::{
    table, Metadata, MetadataLayout, MethodSig, ModuleResolver, Names, SigReader, TypeNames,
    TypeSig,
};
use crate::dotnet::{Assembly, R2rImage};
use crate::name_budget::SharedNameBudget;
use crate::parallel::jobs_in_order;
use std::collections::BTreeSet;
use std::path::Path;

/// One decoded INSTANCE_METHOD_ENTRYPOINTS record.
struct InstanceEntry {
    /// Module whose metadata the method token refers to (0 = this image).
    module: u32,
    owner: Option<TypeSig>,
    member_ref: bool,
    rid: u32,
    method_inst: Vec<TypeSig>,
}

fn parse_instance_entry(data: &[u8], pos: usize) -> Result<InstanceEntry, String> {
    let sig = data.get(pos..).ok_or("instance entry outside the image")?;
    let mut r = SigReader::new(sig);
    let flags = r.uint()?;
    let mut module = 0;
    let mut module_from_context = false;
    if flags & msf::UPDATE_CONTEXT != 0 {
        module = r.uint()?;
        module_from_context = true;
    }
    let mut owner = None;
    if flags & msf::OWNER_TYPE != 0 {
        // The owner's module override, when it has one, is also the method token's module.
        let rest = r.rest();
        if !module_from_context && rest.first() == Some(&0x3f) {
            let mut peek = SigReader::new(rest);
            peek.pos = 1;
            module = peek.uint()?;
        }
        owner = Some(r.type_sig(0)?);
    }
    if flags & msf::SLOT_INSTEAD_OF_TOKEN != 0 {
        return Err("instance entry names its method by slot, which netprobe cannot name".into());
    }
    let rid = r.uint()?;
    let mut method_inst = Vec::new();
    if flags & msf::METHOD_INSTANTIATION != 0 {
        let n = r.uint()?;
        if us(n) > r.rest().len() {
            return Err("instantiation count exceeds the entry".into());
        }
        for _ in 0..n {
            method_inst.push(r.type_sig(0)?);
        }
    }
    if flags & msf::CONSTRAINED != 0 {
        r.type_sig(0)?;
    }
    Ok(InstanceEntry {
        module,
        owner,
        member_ref: flags & msf::MEMBER_REF_TOKEN != 0,
        rid,
        method_inst,
    })
}

/// The parts of an INSTANCE_METHOD_ENTRYPOINTS record that listing needs, found without building
/// type signatures.
struct InstanceScan {
    module: u32,
    member_ref: bool,
    rid: u32,
    /// File position of the owner type signature, when present.
    owner_at: Option<usize>,
    runtime_function: u32,
    has_fixups: bool,
}

fn scan_instance_entry(data: &[u8], pos: usize) -> Result<InstanceScan, String> {
    let sig = data.get(pos..).ok_or("instance entry outside the image")?;
    let mut r = SigReader::new(sig);
    let flags = r.uint()?;
    let mut module = 0;
    let mut module_from_context = false;
    if flags & msf::UPDATE_CONTEXT != 0 {
        module = r.uint()?;
        module_from_context = true;
    }
    let mut owner_at = None;
    if flags & msf::OWNER_TYPE != 0 {
        if !module_from_context && r.peek_byte() == Some(0x3f) {
            let mut peek = SigReader::new(r.rest());
            peek.pos = 1;
            module = peek.uint()?;
        }
        owner_at = Some(pos + r.pos);
        r.skip_type(0)?;
    }
    if flags & msf::SLOT_INSTEAD_OF_TOKEN != 0 {
        return Err("instance entry names its method by slot, which netprobe cannot name".into());
    }
    let rid = r.uint()?;
    if flags & msf::METHOD_INSTANTIATION != 0 {
        let n = r.uint()?;
        if us(n) > r.rest().len() {
            return Err("instantiation count exceeds the entry".into());
        }
        for _ in 0..n {
            r.skip_type(0)?;
        }
    }
    if flags & msf::CONSTRAINED != 0 {
        r.skip_type(0)?;
    }
    let (runtime_function, has_fixups) =
        entry_point(data, pos + r.pos).ok_or("instance entry point cut short")?;
    Ok(InstanceScan {
        module,
        member_ref: flags & msf::MEMBER_REF_TOKEN != 0,
        rid,
        owner_at,
        runtime_function,
        has_fixups,
    })
}

/// The TypeDef that owns MethodDef `rid`: the last TypeDef whose `MethodList` starts at or
/// before `rid` (ECMA-335 II.22.37: a type's methods run up to the next type's list).
fn owner_type(md: &Metadata<'_>, rid: u32) -> Option<u32> {
    let n = md.rows(table::TYPE_DEF);
    let (mut lo, mut hi) = (1u32, n);
    let mut best = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let start = md.type_def_method_list(mid)?;
        if start <= rid {
            best = Some(mid);
            lo = mid + 1;
        } else {
            if mid == 0 {
                break;
            }
            hi = mid - 1;
        }
    }
    best
}

/// [`owner_type`] for MethodDef rows asked mostly in increasing order (a listing walks the
/// MethodDef table): the owner found last is kept with its method range, and the binary search
/// runs only for a row outside it. Same answers as [`owner_type`] when the TypeDef table's
/// `MethodList` column never decreases, as ECMA-335 II.22.37 requires (a row inside
/// `[MethodList(t), MethodList(t + 1))` belongs to `t`; with a decreasing column, hostile input,
/// a row may get another type whose list starts at or before it).
struct OwnerCursor {
    owner: u32,
    /// The owner's rows: `first..next` (empty until a search found one).
    first: u32,
    next: u32,
}

impl OwnerCursor {
    fn new() -> OwnerCursor {
        OwnerCursor {
            owner: 0,
            first: 1,
            next: 1,
        }
    }

    /// The owning TypeDef of MethodDef `rid`, 0 when none is found (as `owner_type` gives it).
    fn owner_of(&mut self, md: &Metadata<'_>, rid: u32) -> u32 {
        if (self.first..self.next).contains(&rid) {
            return self.owner;
        }
        self.owner = owner_type(md, rid).unwrap_or(0);
        let first = md.type_def_method_list(self.owner);
        let next = if self.owner < md.rows(table::TYPE_DEF) {
            md.type_def_method_list(self.owner + 1)
        } else {
            Some(md.rows(table::METHOD_DEF).saturating_add(1))
        };
        (self.first, self.next) = match (self.owner, first, next) {
            (1.., Some(first), Some(next)) if first <= rid && rid < next => (first, next),
            // Nothing to keep: the next row is searched for again.
            _ => (1, 1),
        };
        self.owner
    }
}

/// Parameter names of MethodDef `rid`, in parameter order (Param rows with sequence 1..).
fn param_names(md: &Metadata<'_>, rid: u32, n_params: usize) -> Vec<String> {
    let mut names = vec![String::new(); n_params];
    let Some(row) = md.method_def(rid) else {
        return names;
    };
    let end = if rid < md.rows(table::METHOD_DEF) {
        md.method_def(rid + 1)
            .map_or(row.param_list, |r| r.param_list)
    } else {
        md.rows(table::PARAM) + 1
    };
    for p in row.param_list..end.min(row.param_list.saturating_add(256)) {
        if let Some((seq, name)) = md.param(p) {
            if let Some(slot) = usize::from(seq)
                .checked_sub(1)
                .and_then(|i| names.get_mut(i))
            {
                *slot = name.to_string();
            }
        }
    }
    names
}

/// Code ranges of every method, given its main body's runtime function index.
struct CodeMap<'a> {
    functions: &'a [RuntimeFunction],
    is_entry: Vec<bool>,
    /// hot runtime function index -> cold runtime function index
    cold_of: Vec<(u32, u32)>,
}

impl CodeMap<'_> {
    fn range(&self, asm: &Assembly, i: u32) -> Option<CodeRange> {
        let f = self.functions.get(i as usize)?;
        Some(CodeRange {
            rva: Rva(f.begin.into()),
            size: u64::from(f.end.saturating_sub(f.begin)),
            file_offset: asm.rva_to_file_offset(Rva(f.begin.into())),
        })
    }

    /// Runtime functions after `start` up to the next entry point.
    fn followers(&self, start: u32) -> impl Iterator<Item = u32> + '_ {
        ((start as usize + 1)..self.functions.len())
            .take_while(|&j| !self.is_entry[j])
            .map(|j| j as u32)
    }

    fn fragments(&self, asm: &Assembly, main: u32) -> Vec<CodeRange> {
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

/// `Owner::` (the owning TypeDef's name, nested types joined by `+`) of MethodDef rows visited
/// in order: consecutive rows mostly share their owner, whose name is then written once.
struct OwnerPrefix {
    cursor: OwnerCursor,
    /// The owner whose prefix `text` holds (`u32::MAX`: none yet).
    owner: u32,
    text: String,
}

impl OwnerPrefix {
    fn new() -> OwnerPrefix {
        OwnerPrefix {
            cursor: OwnerCursor::new(),
            owner: u32::MAX,
            text: String::new(),
        }
    }

    /// `Owner::` for MethodDef `rid`; `::` alone when no TypeDef owns it ([`Names::type_def_name`]
    /// writes nothing for TypeDef 0).
    fn of(&mut self, names: &Names<'_>, rid: u32) -> &str {
        let owner = self.cursor.owner_of(&names.md, rid);
        if owner != self.owner {
            self.text.clear();
            names.type_def_name(owner, '+', &mut self.text);
            self.text.push_str("::");
            self.owner = owner;
        }
        &self.text
    }
}

/// Builds the method list of `asm` (see [`Assembly::methods`]): names, code ranges and file
/// offsets only; [`details`] adds the structured pieces for one method.
pub(crate) fn methods<'a>(
    asm: &'a Assembly,
    r2r: &'a R2rImage,
    foreign: Option<&'a dyn ModuleResolver<'a>>,
    budget: &SharedNameBudget,
) -> Result<Vec<R2rMethod>, String> {
    methods_where(asm, r2r, foreign, None, &|m| m, budget)
}

/// [`methods`], keeping only the methods whose own name (the `#Strings` entry of their
/// MethodDef or MemberRef row, ECMA-335 II.22.26 and II.22.25) `keep` accepts, before their
/// owner and signature are decoded: the cost of naming a method is paid only for candidates.
/// Entries whose name cannot be read without decoding (a module no resolver opens, a missing
/// row) are kept, so that they are named, or refused, exactly as by [`methods`].
/// Each method is returned as `map` makes it (on the thread that named it: a listing's
/// symbols are made where their names are, not from a second list of methods).
///
/// The names composed count against `budget` on every thread: a method's name repeats its
/// owner's name and the names of its signature's types, which a hostile file may make long and
/// share among thousands of methods ([`crate::name_budget`]). Past it the answer is `Err`
/// ([`OVER_BUDGET`]) and `budget` says it is exceeded; a single name longer than
/// [`crate::name_budget::MAX_NAME`] is refused as malformed.
pub(crate) fn methods_where<'a, T: Send>(
    asm: &'a Assembly,
    r2r: &'a R2rImage,
    foreign: Option<&'a dyn ModuleResolver<'a>>,
    keep: Option<&dyn Fn(&str) -> bool>,
    map: &(dyn Fn(R2rMethod) -> T + Sync),
    budget: &SharedNameBudget,
) -> Result<Vec<T>, String> {
    let data = asm.bytes();
    let pe = asm.pe();
    let md = asm.metadata().with_validated_strings();
    let header = &r2r.header;
    let n_functions = r2r.runtime_functions.len();
    let def_section = header.section(section::METHOD_DEF_ENTRY_POINTS);
    let instance_section = header.section(section::INSTANCE_METHOD_ENTRY_POINTS);
    // Sizes as the header claims them: a hostile one may be near 4 GiB (summed in 64 bits).
    let table_bytes = [def_section, instance_section]
        .iter()
        .flatten()
        .map(|s| u64::from(s.size))
        .sum::<u64>();
    let parallel = table_bytes >= PARALLEL_ENTRY_BYTES;
    let keep_all = keep.is_none();
    // The entry-point tables (and a whole listing's type names) are independent reads of the
    // image: read on two threads when they are large.
    let read = jobs_in_order(3, parallel, |job| match job {
        // The longest first (.NET 8 CoreLib: ~3, ~1.5 and ~1 ms).
        0 => TableRead::Instances(match instance_section {
            Some(s) => instance_entry_positions(pe, data, s).and_then(|positions| {
                positions
                    .into_iter()
                    .map(|p| scan_instance_entry(data, p).map(|e| (p, e)))
                    .collect::<Result<Vec<_>, _>>()
            }),
            None => Ok(Vec::new()),
        }),
        1 => TableRead::Defs(match def_section {
            Some(s) => method_def_entry_points(pe, data, s),
            None => Ok(Vec::new()),
        }),
        // A whole listing names most types many times; one name, a few types once.
        _ => TableRead::TypeNames(match keep_all {
            true => Some(asm.type_names()),
            false => asm.type_names_if_written(),
        }),
    });
    let (mut def_entries, mut instance_entries, mut type_names) =
        (Ok(Vec::new()), Ok(Vec::new()), None);
    for part in read {
        match part {
            TableRead::Instances(i) => instance_entries = i,
            TableRead::Defs(d) => def_entries = d,
            TableRead::TypeNames(t) => type_names = t,
        }
    }
    // The MethodDef table's error first, as when it was read first.
    let def_entries = def_entries?;
    let instance_entries = instance_entries?;
    let names = Names {
        md,
        enclosing: asm.enclosing_types(),
        foreign,
        type_names,
    };
    let mut is_entry = vec![false; n_functions];
    for &(_, rf, _) in &def_entries {
        *is_entry
            .get_mut(rf as usize)
            .ok_or("method entry point beyond RUNTIME_FUNCTIONS")? = true;
    }
    for (_, e) in &instance_entries {
        *is_entry
            .get_mut(e.runtime_function as usize)
            .ok_or("instance entry point beyond RUNTIME_FUNCTIONS")? = true;
    }
    let mut cold_of = Vec::new();
    if let Some(s) = header.section(section::HOT_COLD_MAP) {
        let raw = pe
            .bytes_at(data, s.rva, s.size)
            .ok_or("HOT_COLD_MAP outside the file")?;
        for pair in raw.chunks_exact(8) {
            let cold = u32_at(pair, 0).unwrap_or(0);
            let hot = u32_at(pair, 4).unwrap_or(0);
            if let Some(slot) = is_entry.get_mut(cold as usize) {
                *slot = true;
                cold_of.push((hot, cold));
            }
        }
        cold_of.sort_unstable();
    }
    let code = CodeMap {
        functions: &r2r.runtime_functions,
        is_entry,
        cold_of,
    };
    let naming = EntryNaming {
        asm,
        names: &names,
        code: &code,
        assembly_name: md.assembly_name().unwrap_or("?"),
        budget,
    };
    let Some(keep) = keep else {
        // A whole listing names every entry, in chunks on two threads; joined in order, they
        // give the order (and the first error) of one thread.
        let chunks: Vec<Chunk<'_>> = def_entries
            .chunks(NAMING_CHUNK)
            .map(Chunk::Defs)
            .chain(instance_entries.chunks(NAMING_CHUNK).map(Chunk::Instances))
            .collect();
        let named = jobs_in_order(chunks.len(), parallel, |i| match chunks[i] {
            Chunk::Defs(d) => naming.name_defs(d, None, map),
            Chunk::Instances(e) => naming.name_instances(e, None, map),
        });
        let mut out = Vec::with_capacity(def_entries.len() + instance_entries.len());
        for part in named {
            out.extend(part?);
        }
        return Ok(out);
    };
    let mut out = naming.name_defs(&def_entries, Some(keep), map)?;
    out.extend(naming.name_instances(&instance_entries, Some(keep), map)?);
    Ok(out)
}

/// Entry-point tables smaller than this (METHODDEF_ENTRYPOINTS plus INSTANCE_METHOD_ENTRYPOINTS,
/// in bytes) are read and named on one thread. Measured on this 2-CPU VM (`symbols`, medians):
/// .NET 8 CoreLib (458 KiB of tables, 36,000 methods) 34 -> 27 ms on two threads,
/// System.Linq.Expressions (244 KiB, 14,800) 16.6 -> 15.4 ms, System.Private.Xml (99 KiB,
/// 12,900) 11.6 ms both ways, System.Linq (19 KiB) 5.4 -> 5.9 ms: below ~100 KiB the second
/// thread's start and fresh heap cost what it saves.
const PARALLEL_ENTRY_BYTES: u64 = 128 * 1024;

/// Entries named per job of a whole listing: small enough that a thread which starts late (the
/// scheduler may queue it behind this one for a few milliseconds) leaves little to wait for,
/// large enough that a job's buffers and owner lookups are paid rarely (.NET 8 CoreLib: 36 jobs).
const NAMING_CHUNK: usize = 1024;

/// One of the reads of [`methods_where`] before any method is named (one job each).
enum TableRead<'a> {
    Instances(Result<Vec<(usize, InstanceScan)>, String>),
    Defs(Result<Vec<(u32, u32, bool)>, String>),
    TypeNames(Option<&'a TypeNames>),
}

/// One job of a whole listing's naming.
#[derive(Clone, Copy)]
enum Chunk<'e> {
    Defs(&'e [(u32, u32, bool)]),
    Instances(&'e [(usize, InstanceScan)]),
}

/// What naming entry points needs, shared by the threads of a listing.
struct EntryNaming<'n, 'a> {
    asm: &'a Assembly,
    names: &'n Names<'a>,
    code: &'n CodeMap<'a>,
    assembly_name: &'a str,
    budget: &'n SharedNameBudget,
}

/// The error of a listing whose names exceeded its budget (the caller asks the budget).
pub(crate) const OVER_BUDGET: &str = "the names composed exceed the image's name budget";

type Named<T> = Result<Vec<T>, String>;

impl EntryNaming<'_, '_> {
    /// The methods of METHODDEF_ENTRYPOINTS `entries` (MethodDef rid, runtime function, has
    /// fixups) whose own name `keep` accepts (all without `keep`), in order; `Err` at the first
    /// entry whose row or signature cannot be read.
    fn name_defs<T>(
        &self,
        entries: &[(u32, u32, bool)],
        keep: Option<&dyn Fn(&str) -> bool>,
        map: &dyn Fn(R2rMethod) -> T,
    ) -> Named<T> {
        let (asm, names, code) = (self.asm, self.names, self.code);
        let md = names.md;
        let mut out = Vec::with_capacity(if keep.is_some() { 0 } else { entries.len() });
        let mut owners = OwnerPrefix::new();
        let mut scratch = String::new();
        let mut name_buf = String::with_capacity(256);
        let mut budget = self.budget.share();
        for &(rid, rf, has_fixups) in entries {
            // The name alone first: most rows are not wanted when `keep` picks a few.
            if let (Some(k), Some(name)) = (keep, md.method_def_name(rid)) {
                if !k(name) {
                    continue;
                }
            }
            let row = md
                .method_def(rid)
                .ok_or_else(|| format!("MethodDef row {rid} unreadable"))?;
            if keep.is_some_and(|k| !k(row.name)) {
                continue;
            }
            let owner_name = owners.of(names, rid);
            // Written into a reused buffer, then copied at its exact size: no reallocation while
            // the signature is printed, no spare capacity kept for the 36,000 names of CoreLib.
            name_buf.clear();
            let qualified_len = owner_name.len() + row.name.len();
            // `Owner::Method` goes in the middle of the signature text.
            let mut qualified = std::mem::take(&mut scratch);
            qualified.clear();
            qualified.push_str(owner_name);
            qualified.push_str(row.name);
            debug_assert_eq!(qualified.len(), qualified_len);
            names
                .method_from_sig(
                    &mut SigReader::new(row.signature),
                    &qualified,
                    Some(self.assembly_name),
                    &mut name_buf,
                    0,
                )
                .map_err(|e| format!("MethodDef {rid:#x} signature: {e}"))?;
            scratch = qualified;
            if !budget.take(name_buf.len()) {
                return Err(OVER_BUDGET.into());
            }
            out.push(map(finish(
                asm,
                code,
                name_buf.as_str().to_owned(),
                0x0600_0000 | rid,
                EntryKind::MethodDef,
                has_fixups,
                rf,
                None,
            )?));
        }
        if !budget.finish() {
            return Err(OVER_BUDGET.into());
        }
        Ok(out)
    }

    /// The methods of INSTANCE_METHOD_ENTRYPOINTS `entries` (file position, scanned entry)
    /// whose own name `keep` accepts (all without `keep`), in order; `Err` at the first entry
    /// that cannot be named.
    fn name_instances<T>(
        &self,
        entries: &[(usize, InstanceScan)],
        keep: Option<&dyn Fn(&str) -> bool>,
        map: &dyn Fn(R2rMethod) -> T,
    ) -> Named<T> {
        let (asm, names, code) = (self.asm, self.names, self.code);
        let data = asm.bytes();
        let mut out = Vec::with_capacity(if keep.is_some() { 0 } else { entries.len() });
        let mut scratch = String::new();
        let mut budget = self.budget.share();
        for &(pos, ref e) in entries {
            if let (Some(k), Some(raw)) = (keep, instance_method_name(names, e)) {
                if !k(raw) {
                    continue;
                }
            }
            let (name, token) = instance_name(names, data, e, &mut scratch)?;
            if !budget.take(name.len()) {
                return Err(OVER_BUDGET.into());
            }
            out.push(map(finish(
                asm,
                code,
                name,
                token,
                EntryKind::Instance,
                e.has_fixups,
                e.runtime_function,
                Some(pos),
            )?));
        }
        if !budget.finish() {
            return Err(OVER_BUDGET.into());
        }
        Ok(out)
    }
}

/// Every MethodDef of `asm` as `(token, name)`, named like [`methods`] names precompiled ones
/// (`[instance ]RET [Assembly] Namespace.Type::Method(ARGS)`), whether or not the method has
/// precompiled code: IL-only assemblies included. Rows whose signature does not decode are
/// skipped (a listing for explanations, not for probes), and so are the names past the image's
/// name budget ([`crate::name_budget`]: a hostile file's methods may all name long strings).
pub(crate) fn method_def_names(asm: &Assembly) -> Vec<(u32, String)> {
    let md = asm.metadata().with_validated_strings();
    let names = Names {
        md,
        enclosing: asm.enclosing_types(),
        foreign: None,
        type_names: Some(asm.type_names()),
    };
    let assembly_name = md.assembly_name().unwrap_or("?");
    let rows = md.rows(table::METHOD_DEF);
    let mut out = Vec::with_capacity(rows as usize);
    let mut owners = OwnerPrefix::new();
    let mut budget = crate::name_budget::NameBudget::for_file(asm.bytes().len());
    for rid in 1..=rows {
        let Some(row) = md.method_def(rid) else {
            continue;
        };
        let qualified = format!("{}{}", owners.of(&names, rid), row.name);
        let mut name = String::with_capacity(64 + qualified.len());
        if names
            .method_from_sig(
                &mut SigReader::new(row.signature),
                &qualified,
                Some(assembly_name),
                &mut name,
                0,
            )
            .is_ok()
        {
            if !budget.take(name.len()) {
                break;
            }
            out.push((0x0600_0000 | rid, name));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn finish(
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

/// Namespace of the outermost type and the nesting path of TypeDef `rid`.
fn type_path(names: &Names<'_>, rid: u32) -> (String, Vec<String>) {
    let mut path = Vec::new();
    let mut cur = rid;
    let mut namespace = String::new();
    while cur != 0 && path.len() < 64 {
        let (_, name, ns) = names.md.type_def(cur).unwrap_or((0, "?", ""));
        path.push(name.to_string());
        namespace = ns.to_string();
        cur = names.enclosing.get(cur as usize).copied().unwrap_or(0);
    }
    path.reverse();
    (namespace, path)
}

/// What an instance entry's method token names, in the method's own module.
struct InstanceTarget<'n> {
    module_names: Names<'n>,
    method_name: String,
    sig: MethodSig,
    owner_rid: u32,
}

fn instance_target<'n>(names: &Names<'n>, e: &InstanceEntry) -> Result<InstanceTarget<'n>, String> {
    let mn = names.in_module(e.module).ok_or_else(|| {
        format!(
            "instance entry refers to module #{} that netprobe cannot open",
            e.module
        )
    })?;
    if !e.member_ref {
        let row = mn
            .md
            .method_def(e.rid)
            .ok_or_else(|| format!("instance entry names missing MethodDef {}", e.rid))?;
        Ok(InstanceTarget {
            sig: mn.md.method_sig(row.signature)?,
            method_name: row.name.to_string(),
            owner_rid: owner_type(&mn.md, e.rid).unwrap_or(0),
            module_names: mn,
        })
    } else {
        let (_, name, blob) = mn
            .md
            .member_ref(e.rid)
            .ok_or_else(|| format!("instance entry names missing MemberRef {}", e.rid))?;
        Ok(InstanceTarget {
            sig: mn.md.method_sig(blob)?,
            method_name: name.to_string(),
            owner_rid: 0,
            module_names: mn,
        })
    }
}

/// The owner of an instantiation in reflection style (``Dictionary`2[System.__Canon,...]``).
fn instance_owner(names: &Names<'_>, e: &InstanceEntry, t: &InstanceTarget<'_>) -> String {
    let mut owner = String::new();
    match &e.owner {
        Some(o) => names.reflection(o, &mut owner),
        None => t.module_names.type_def_name(t.owner_rid, '+', &mut owner),
    }
    owner
}

/// The own name of the method an instance entry instantiates (its MethodDef or MemberRef
/// row's name), as [`instance_name`] puts it after `::`; `None` when the module or row cannot be
/// read.
fn instance_method_name<'n>(names: &Names<'n>, e: &InstanceScan) -> Option<&'n str> {
    let mn = names.in_module(e.module)?;
    if e.member_ref {
        mn.md.member_ref(e.rid).map(|(_, name, _)| name)
    } else {
        mn.md.method_def(e.rid).map(|row| row.name)
    }
}

/// The crossgen-style name of an instantiation, formatted from the signature bytes.
fn instance_name(
    names: &Names<'_>,
    data: &[u8],
    e: &InstanceScan,
    owner: &mut String,
) -> Result<(String, u32), String> {
    let Some(mn) = names.in_module(e.module) else {
        // A method of another module of the version bubble that no resolver could open: keep
        // the entry, named by module and token (see `Assembly::methods`).
        let table = if e.member_ref {
            0x0a00_0000
        } else {
            0x0600_0000
        };
        return Ok((
            format!("[module#{}]<{:#010x}>", e.module, table | e.rid),
            table | e.rid,
        ));
    };
    let (method_name, sig, token, owner_rid) = if e.member_ref {
        let (_, name, blob) = mn
            .md
            .member_ref(e.rid)
            .ok_or_else(|| format!("instance entry names missing MemberRef {}", e.rid))?;
        (name, blob, 0x0a00_0000 | e.rid, 0)
    } else {
        let row = mn
            .md
            .method_def(e.rid)
            .ok_or_else(|| format!("instance entry names missing MethodDef {}", e.rid))?;
        let owner = owner_type(&mn.md, e.rid).unwrap_or(0);
        (row.name, row.signature, 0x0600_0000 | e.rid, owner)
    };
    owner.clear();
    match e.owner_at {
        Some(at) => {
            let mut r = SigReader::new(data.get(at..).unwrap_or(&[]));
            names.reflection_from_sig(&mut r, owner, 0)?;
        }
        None => mn.type_def_name(owner_rid, '+', owner),
    }
    owner.push_str("::");
    owner.push_str(method_name);
    let assembly = mn.md.assembly_name().unwrap_or("?");
    let mut name = String::with_capacity(64 + owner.len());
    mn.method_from_sig(
        &mut SigReader::new(sig),
        owner,
        Some(assembly),
        &mut name,
        0,
    )?;
    Ok((name, token))
}

/// The structured description of one listed method (see [`Assembly::details`]).
pub(crate) fn details<'a>(
    asm: &'a Assembly,
    m: &R2rMethod,
    foreign: Option<&'a dyn ModuleResolver<'a>>,
) -> Result<MethodDetails, String> {
    let names = Names {
        md: asm.metadata(),
        enclosing: asm.enclosing_types(),
        foreign,
        type_names: None,
    };
    match m.instance_entry {
        None => {
            let rid = m.token & 0x00ff_ffff;
            let row = names
                .md
                .method_def(rid)
                .ok_or_else(|| format!("MethodDef row {rid} unreadable"))?;
            let signature = names.md.method_sig(row.signature)?;
            let owner = owner_type(&names.md, rid).unwrap_or(0);
            let (namespace, type_path) = type_path(&names, owner);
            Ok(MethodDetails {
                namespace,
                type_path,
                method_name: row.name.to_string(),
                param_names: param_names(&names.md, rid, signature.params.len()),
                signature,
                method_instantiation: Vec::new(),
            })
        }
        Some(pos) => {
            let e = parse_instance_entry(asm.bytes(), pos)?;
            let t = instance_target(&names, &e)?;
            let (namespace, mut type_path) = type_path(&t.module_names, t.owner_rid);
            let owner = instance_owner(&names, &e, &t);
            if let (Some(last), Some(open)) = (type_path.last_mut(), owner.rfind('[')) {
                if e.owner.is_some() && owner.ends_with(']') {
                    last.push_str(&owner[open..]);
                }
            }
            let param_names = if e.member_ref {
                vec![String::new(); t.sig.params.len()]
            } else {
                param_names(&t.module_names.md, e.rid, t.sig.params.len())
            };
            Ok(MethodDetails {
                namespace,
                type_path,
                method_name: t.method_name,
                param_names,
                signature: t.sig,
                method_instantiation: e.method_inst,
            })
        }
    }
}

/// Other assemblies of a ReadyToRun version bubble, opened from the directory of the image, so
/// that instantiations over their types get real names (see [`Assembly::methods_with`]).
///
/// Module override indices follow readytorun-format.md "ManifestMetadata": 1..=ILAR are the
/// image's own AssemblyRef rows; above that, the R2R manifest metadata's AssemblyRefs (from
/// format 6.3 on, ILAR+1 is the manifest itself and ILAR+2 its first AssemblyRef).
pub struct SiblingAssemblies {
    modules: Vec<(u32, Assembly, Vec<u32>)>,
}

impl SiblingAssemblies {
    /// Opens, for each module index in `indices`, `<dir of asm>/<AssemblyRef name>.dll` when it
    /// exists and parses; indices that name no readable file stay unresolved (their types print
    /// as `[module#N]<token>`).
    pub fn open(asm: &Assembly, indices: impl IntoIterator<Item = u32>) -> SiblingAssemblies {
        let dir = asm.path().parent().unwrap_or(Path::new("."));
        let md = asm.metadata();
        let ilar = md.rows(table::ASSEMBLY_REF);
        let manifest = asm.r2r().and_then(|r| {
            let s = r.header.section(section::MANIFEST_METADATA)?;
            let bytes = asm.pe().bytes_at(asm.bytes(), s.rva, s.size)?;
            let layout = MetadataLayout::parse(bytes).ok()?;
            let v63 = (r.header.major_version, r.header.minor_version) >= (6, 3);
            Some((layout, bytes, v63))
        });
        let mut modules = Vec::new();
        let unique: BTreeSet<u32> = indices.into_iter().collect();
        for index in unique {
            let name = if index == 0 {
                None
            } else if index <= ilar {
                md.assembly_ref_name(index).map(str::to_string)
            } else {
                manifest.as_ref().and_then(|(layout, bytes, v63)| {
                    let m = Metadata::new(layout, bytes);
                    let rid = if *v63 { index - ilar - 1 } else { index - ilar };
                    m.assembly_ref_name(rid).map(str::to_string)
                })
            };
            let Some(name) = name else { continue };
            if let Ok(other) = asm.open_sibling(&dir.join(format!("{name}.dll"))) {
                let enclosing = other.enclosing_types().to_vec();
                modules.push((index, other, enclosing));
            }
        }
        SiblingAssemblies { modules }
    }

    /// Module indices referenced by `asm`'s instantiations (in type arguments or as the method's
    /// module); empty when every instantiation is local.
    pub fn referenced_modules(asm: &Assembly) -> BTreeSet<u32> {
        let mut set = BTreeSet::new();
        let Some(r2r) = asm.r2r() else { return set };
        let Some(s) = r2r.header.section(section::INSTANCE_METHOD_ENTRY_POINTS) else {
            return set;
        };
        let Ok(positions) = instance_entry_positions(asm.pe(), asm.bytes(), s) else {
            return set;
        };
        for p in positions {
            if let Ok(e) = parse_instance_entry(asm.bytes(), p) {
                set.insert(e.module);
                if let Some(o) = &e.owner {
                    collect_modules(o, &mut set);
                }
                for t in &e.method_inst {
                    collect_modules(t, &mut set);
                }
            }
        }
        set.remove(&0);
        set
    }
}

fn collect_modules(t: &TypeSig, set: &mut BTreeSet<u32>) {
    match t {
        TypeSig::Class { ty } | TypeSig::ValueType { ty } => {
            set.insert(ty.module);
        }
        TypeSig::GenericInst { generic, args, .. } => {
            set.insert(generic.module);
            for a in args {
                collect_modules(a, set);
            }
        }
        TypeSig::Ptr { to } | TypeSig::ByRef { to } => collect_modules(to, set),
        TypeSig::SzArray { of } | TypeSig::Array { of, .. } => collect_modules(of, set),
        TypeSig::Modified { inner, .. } | TypeSig::Pinned { inner } => collect_modules(inner, set),
        _ => {}
    }
}

impl<'a> ModuleResolver<'a> for &'a SiblingAssemblies {
    fn module(&self, index: u32) -> Option<(Metadata<'a>, &'a [u32])> {
        let s: &'a SiblingAssemblies = self;
        s.modules
            .iter()
            .find(|(i, _, _)| *i == index)
            .map(|(_, a, enc)| (a.metadata(), enc.as_slice()))
    }
}
