//! Every method of a ReadyToRun image, named: METHODDEF_ENTRYPOINTS (MethodDef row ->
//! RUNTIME_FUNCTIONS index, readytorun-format.md) and INSTANCE_METHOD_ENTRYPOINTS, read and
//! named on one thread or two, within the image's name budget.

use super::super::parser::{instance_entry_positions, method_def_entry_points};
use super::super::types::{section, EntryKind, R2rMethod};
use super::code_map::{finish, CodeMap};
use super::instance::{instance_method_name, instance_name, scan_instance_entry, InstanceScan};
use super::owners::OwnerPrefix;
use crate::bytes::u32_at;
use crate::dotnet::metadata::{table, ModuleResolver, Names, SigReader, TypeNames};
use crate::dotnet::{Assembly, R2rImage};
use crate::name_budget::SharedNameBudget;
use crate::parallel::jobs_in_order;

/// Builds the method list of `asm` (see [`Assembly::methods`]): names, code ranges and file
/// offsets only; [`details`](super::details::details) adds the structured pieces for one method.
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
