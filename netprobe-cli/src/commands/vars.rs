//! `netprobe symbols --vars FILE FUNCTION`: what a probe on each matching function reads of its
//! parameters, from DWARF (like `perf probe --vars`): each parameter's type, its location where
//! the entry probe goes, and how netprobe reads it or why not ([`crate::lang::dwarf_args`], the
//! same decisions `trace` makes when no ARG is typed).

use crate::cli::SymbolsArgs;
use crate::lang::dwarf_args::{self, describe_param_location, DwarfArgs, ProbePoint, Reading};
use crate::output::Out;
use crate::plan::ArgRequest;
use crate::spec::{self, ProbeSpec, Targeting};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct JsonParam<'a> {
    function: &'a str,
    probe_address: String,
    name: &'a str,
    #[serde(rename = "type")]
    ty: &'a str,
    location: String,
    /// `NAME=TYPE` values read, empty when not readable.
    reads: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_readable: Option<&'a str>,
}

/// `name=type` for each value a parameter is read as.
fn reads(r: &Reading) -> Vec<String> {
    r.values
        .iter()
        .map(|a| match a {
            ArgRequest::Located { name, ty, words } => format!(
                "{name}={} at {}",
                ty.label(),
                words
                    .iter()
                    .map(dwarf_args::describe_location)
                    .collect::<Vec<_>>()
                    .join("+")
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

pub fn run(args: &SymbolsArgs) -> anyhow::Result<ExitCode> {
    let func = args.pattern.as_deref().ok_or_else(|| {
        anyhow::anyhow!("--vars needs a function: netprobe symbols --vars FILE FUNCTION")
    })?;
    let file = args
        .file
        .canonicalize()
        .unwrap_or_else(|_| args.file.clone());
    let sections = dwarf_args::sections_of(&file)?;
    if !sections.has_debug_info() {
        anyhow::bail!(
            "{} has no DWARF debug info and no debug file was found (by build-id under /usr/lib/debug, .gnu_debuglink, or DEBUGINFOD_URLS): install its -dbgsym package or build with -g, or type the arguments in the spec (FUNCTION ARG...)",
            args.file.display()
        );
    }
    let spec = ProbeSpec::parse(&format!("{}:{func}", file.display()))?;
    let locs = spec::resolve(&spec, &Targeting::SystemWide)?;
    let go = crate::lang::go::GoImages::analyze(&locs);
    let mut out = Out::new();
    let mut found: Vec<(DwarfArgs, bool)> = Vec::new();
    for loc in &locs {
        let entry = match loc.symbol.as_ref().map(|s| s.address) {
            Some(netprobe_core::symbol::Address::Virt(v)) => Some(v.0),
            _ => None,
        };
        let is_go = go.function(loc);
        let point = match is_go {
            Some((_, f)) => ProbePoint::At(f.entry_probe.0),
            None => ProbePoint::NativeEntry,
        };
        if let Some(a) =
            dwarf_args::dwarf_args(&sections, &file, entry, loc.file_offset, &loc.name, point)?
        {
            found.push((a, is_go.is_some()));
        }
    }
    if found.is_empty() {
        anyhow::bail!(
            "no DWARF description of {func} in {} (a function of a unit built without -g?)",
            args.file.display()
        );
    }
    for (a, is_go) in &found {
        let at = a.pc.saturating_sub(a.function.entry);
        if !args.json {
            out.line(&format!(
                "{} at {:#x} ({}):",
                a.function.name,
                a.pc,
                match (at, is_go) {
                    (0, _) => "its entry".to_string(),
                    (_, true) => format!("entry+{at:#x}, after its stack check"),
                    (_, false) => format!("entry+{at:#x}, where the prologue ends"),
                }
            ))?;
            out.line(&format!(
                "  {:<16} {:<24} {:<16} READ",
                "NAME", "TYPE", "LOCATION"
            ))?;
        }
        for (p, r) in &a.params {
            let location = describe_param_location(&p.location);
            let not_readable = r.not_read.as_deref();
            if args.json {
                out.json(&JsonParam {
                    function: &a.function.name,
                    probe_address: format!("{:#x}", a.pc),
                    name: &p.name,
                    ty: p.ty.name(),
                    location,
                    reads: reads(r),
                    not_readable,
                })?;
                continue;
            }
            let read = reads(r)
                .into_iter()
                .chain(not_readable.map(|why| format!("not readable at this point: {why}")))
                .collect::<Vec<_>>()
                .join("; ");
            out.line(&format!(
                "  {:<16} {:<24} {:<16} {read}",
                p.name,
                p.ty.name(),
                location
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
