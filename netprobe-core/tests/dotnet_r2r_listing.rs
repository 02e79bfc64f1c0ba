//! The ReadyToRun reader on the real Microsoft runtimes that `sample-app/dotnet/fetch-runtimes.sh`
//! puts in the cache (.NET 8 and .NET Core 3.1): every framework assembly lists its methods,
//! method-def and type names agree with the listing, on two threads too, a component assembly is
//! explained, mutated images never panic, and System.Console's listing as a snapshot.
//!
//! A missing runtime skips a trial outside CI and fails it under CI=true.

mod dotnet_runtime;

use dotnet_runtime::{check_methods, list, Runtime, NET31, NET8};
use fixtures::e2e::{self, err};
use netprobe_core::dotnet::{Assembly, EntryKind, R2rMethod};
use netprobe_core::Error;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn count(methods: &[R2rMethod], kind: EntryKind) -> usize {
    methods.iter().filter(|m| m.entry == kind).count()
}

/// Lists the main framework assemblies and checks sizes and counts.
fn lists_framework(rt: Runtime, min_corelib_defs: usize) -> Result<(), String> {
    for name in [
        "System.Private.CoreLib",
        "System.Console",
        "System.Linq",
        "System.Collections",
        "System.Private.Uri",
        "System.Text.RegularExpressions",
    ] {
        let (asm, methods) = list(rt, name)?;
        let r2r = asm.r2r().ok_or("no R2R header")?;
        eprintln!(
            "  .NET {} {name}: R2R {}.{}, {} methoddef + {} instance entry points, {} runtime functions, {} with funclets",
            rt.version,
            r2r.header.major_version,
            r2r.header.minor_version,
            count(&methods, EntryKind::MethodDef),
            count(&methods, EntryKind::Instance),
            r2r.runtime_functions.len(),
            methods.iter().filter(|m| !m.funclets.is_empty()).count(),
        );
        if name == "System.Private.CoreLib"
            && count(&methods, EntryKind::MethodDef) < min_corelib_defs
        {
            return Err(format!(
                "only {} methoddef entry points in CoreLib",
                count(&methods, EntryKind::MethodDef)
            ));
        }
        let sleep = methods.iter().find(|m| {
            m.name == "void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)"
        });
        if name == "System.Private.CoreLib" && sleep.is_none() {
            return Err("Thread::Sleep(int32) not listed".into());
        }
    }
    // The structured details agree with the listed name (two independent formatting paths:
    // straight from signature bytes for listing, from decoded TypeSigs here).
    let (asm, methods) = list(rt, "System.Private.CoreLib")?;
    for m in &methods {
        let d = asm.details(m).map_err(err)?;
        let params: Vec<String> = d
            .signature
            .params
            .iter()
            .map(|p| asm.type_text(p))
            .collect();
        let ret = asm.type_text(&d.signature.ret);
        let prefix = format!(
            "{}{ret} [",
            if d.signature.has_this {
                "instance "
            } else {
                ""
            }
        );
        let suffix = format!("::{}({})", d.method_name, params.join(","));
        if d.method_name != m.method_name()
            || !m.name.starts_with(&prefix)
            || !m.name.ends_with(&suffix)
        {
            return Err(format!(
                "details disagree with name {}: {prefix} ... {suffix}",
                m.name
            ));
        }
        if d.param_names.len() != d.signature.params.len() {
            return Err(format!("{}: {} param names", m.name, d.param_names.len()));
        }
    }
    let sleep = methods
        .iter()
        .find(|m| m.short_name() == "System.Threading.Thread::Sleep" && m.name.ends_with("(int32)"))
        .ok_or("no Thread::Sleep(int32)")?;
    let d = asm.details(sleep).map_err(err)?;
    if d.param_names != ["millisecondsTimeout"]
        || d.namespace != "System.Threading"
        || d.type_path != ["Thread"]
    {
        return Err(format!("Thread::Sleep details: {d:?}"));
    }
    eprintln!(
        "  details of all {} CoreLib methods agree with their names",
        methods.len()
    );

    // The SymbolSource view: one ManagedMethod symbol per method, RVA address, total size.
    use netprobe_core::symbol::{Address, SymbolKind, SymbolOrigin, SymbolSource};
    let symbols = asm.symbols().map_err(err)?;
    if symbols.len() != methods.len() {
        return Err(format!(
            "{} symbols for {} methods",
            symbols.len(),
            methods.len()
        ));
    }
    for (s, m) in symbols.iter().zip(&methods) {
        if s.kind != SymbolKind::ManagedMethod
            || s.origin != SymbolOrigin::ReadyToRun
            || s.address != Address::Rva(m.rva)
            || s.size != Some(m.total_size)
            || s.file_offset != m.file_offset
            || s.name != m.name
        {
            return Err(format!("symbol {s:?} does not match method {}", m.name));
        }
    }
    let mut rvas: Vec<u64> = methods.iter().map(|m| m.rva.0).collect();
    rvas.sort_unstable();
    let shared = rvas.windows(2).filter(|w| w[0] == w[1]).count();
    eprintln!("  {shared} CoreLib methods share their entry point with another method");

    // Every runtime function is some method's main body or funclet, exactly once, except code
    // that no entry point names (none in these images).
    let n = asm.r2r().map_or(0, |r| r.runtime_functions.len());
    let mut covered = vec![false; n];
    for m in &methods {
        covered[m.runtime_function as usize] = true;
        let mut i = m.runtime_function as usize;
        for _ in &m.funclets {
            i += 1;
            covered[i] = true;
        }
    }
    let uncovered = covered.iter().filter(|c| !**c).count();
    eprintln!("  CoreLib runtime functions not reached from an entry point: {uncovered} of {n}");
    Ok(())
}

/// The `.dll` files of `rt`'s shared framework.
fn framework_dlls(rt: Runtime) -> Result<Vec<PathBuf>, String> {
    let mut dlls = Vec::new();
    for entry in std::fs::read_dir(rt.shared()).map_err(err)? {
        let path = entry.map_err(err)?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("dll") {
            dlls.push(path);
        }
    }
    Ok(dlls)
}

/// Every assembly of the shared framework is either ReadyToRun (listed) or IL-only (explained).
fn whole_framework(rt: Runtime) -> Result<(), String> {
    let (mut r2r, mut il, mut total) = (0, 0, 0);
    for p in framework_dlls(rt)? {
        let asm = match Assembly::open(&p) {
            Ok(a) => a,
            // Native libraries shipped as .dll do not exist on Linux; anything else is a bug.
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        match asm.methods() {
            Ok(m) => {
                check_methods(&asm, &m).map_err(|e| format!("{}: {e}", p.display()))?;
                r2r += 1;
                total += m.len();
            }
            Err(Error::IlOnly { .. }) => il += 1,
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    eprintln!(
        "  .NET {}: {r2r} ReadyToRun assemblies ({total} methods), {il} IL-only",
        rt.version
    );
    if r2r < 50 {
        return Err(format!("only {r2r} ReadyToRun assemblies"));
    }
    Ok(())
}

/// Truncations and byte flips of a real image (in its headers, R2R sections and metadata) give
/// a result or an error, never a panic.
fn mutations_never_panic(rt: Runtime) -> Result<(), String> {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let path = rt.dll("System.Console");
    let original = std::fs::read(&path).map_err(err)?;
    let asm = Assembly::open(&path).map_err(err)?;
    // Interesting regions: PE headers, every R2R section, the metadata.
    let mut regions: Vec<(usize, usize)> = vec![(0, 0x400)];
    let r2r = asm.r2r().ok_or("not R2R")?;
    for s in &r2r.header.sections {
        if let Some(o) = asm.rva_to_file_offset(netprobe_core::addr::Rva(s.rva.into())) {
            regions.push((o.0 as usize, s.size.max(1) as usize));
        }
    }
    if let Some(o) = asm.rva_to_file_offset(netprobe_core::addr::Rva(r2r.header.rva.into())) {
        regions.push((o.0 as usize, 16 + 12 * r2r.header.sections.len()));
    }
    let len = original.len();
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0usize..regions.len(),
        proptest::collection::vec((any::<u32>(), any::<u8>()), 1..8),
        prop_oneof![Just(None), (0usize..len).prop_map(Some)],
    );
    let (ok, errs) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let outcome = runner.run(&strategy, |(region, flips, truncate)| {
        let mut bytes = original.clone();
        let (start, size) = regions[region];
        for (at, xor) in flips {
            let i = start + at as usize % size;
            if let Some(b) = bytes.get_mut(i) {
                *b ^= xor.max(1);
            }
        }
        if let Some(t) = truncate {
            bytes.truncate(t);
        }
        match Assembly::parse(&path, bytes).and_then(|a| a.methods()) {
            Ok(_) => ok.set(ok.get() + 1),
            Err(_) => errs.set(errs.get() + 1),
        }
        Ok(())
    });
    outcome.map_err(|e| format!("{e}"))?;
    eprintln!(
        "  {} mutated System.Console.dll: {} parsed, {} errors, 0 panics",
        rt.version,
        ok.get(),
        errs.get()
    );
    Ok(())
}

/// A component assembly of a composite image (READYTORUN_FLAG_COMPONENT) is explained, naming
/// the composite from its OwnerCompositeExecutable section. Built from a real image by setting
/// the flag and turning its COMPILER_IDENTIFIER section into that section.
fn component_assembly_is_explained(rt: Runtime) -> Result<(), String> {
    use netprobe_core::addr::Rva;
    let path = rt.dll("System.Console");
    let asm = Assembly::open(&path).map_err(err)?;
    let r2r = asm.r2r().ok_or("not R2R")?;
    let mut bytes = asm.bytes().to_vec();
    let h = asm
        .rva_to_file_offset(Rva(r2r.header.rva.into()))
        .ok_or("header not in file")?
        .0 as usize;
    let flags = u32::from_le_bytes(bytes[h + 8..h + 12].try_into().unwrap()) | 0x20;
    bytes[h + 8..h + 12].copy_from_slice(&flags.to_le_bytes());
    let i = r2r
        .header
        .sections
        .iter()
        .position(|s| s.kind == 100)
        .ok_or("no compiler identifier")?;
    let at = h + 16 + 12 * i;
    bytes[at..at + 4].copy_from_slice(&116u32.to_le_bytes());
    let id = &r2r.header.sections[i];
    let name_at = asm.rva_to_file_offset(Rva(id.rva.into())).ok_or("no id")?.0 as usize;
    let composite = b"framework-r2r.dll\0";
    if (id.size as usize) < composite.len() {
        return Err("compiler identifier too short to reuse".into());
    }
    bytes[name_at..name_at + composite.len()].copy_from_slice(composite);
    match Assembly::parse(&path, bytes) {
        Err(e @ Error::CompositeComponent { .. }) => {
            let msg = e.to_string();
            eprintln!("  {msg}");
            if !msg.contains("framework-r2r.dll") {
                return Err(format!("message does not name the composite: {msg}"));
            }
            Ok(())
        }
        Err(e) => Err(format!("expected CompositeComponent, got {e}")),
        Ok(_) => Err("expected CompositeComponent, got an assembly".into()),
    }
}

/// A stable excerpt: the first 60 methods of System.Console.dll with RVA, sizes, file offset.
fn snapshot(rt: Runtime) -> Result<(), String> {
    let (_, methods) = list(rt, "System.Console")?;
    let text: String = methods
        .iter()
        .take(60)
        .map(|m| {
            format!(
                "{:#08x} size {:#x} total {:#x} funclets {} off {:#x} {}\n",
                m.rva.0,
                m.size,
                m.total_size,
                m.funclets.len(),
                m.file_offset.map_or(0, |o| o.0),
                m.name
            )
        })
        .collect();
    let name = format!("system_console_{}", rt.major.replace('.', "_"));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
    Ok(())
}

/// `Assembly::method_def_names` (every MethodDef, code or not) names each precompiled MethodDef
/// method exactly as the ReadyToRun listing does, under the same token, and lists the methods
/// without precompiled code too (two formatting paths over the same rows).
fn method_def_names_agree_with_the_listing(rt: Runtime) -> Result<(), String> {
    let (asm, methods) = list(rt, "System.Private.CoreLib")?;
    let all: HashMap<u32, String> = asm.method_def_names().into_iter().collect();
    let mut checked = 0;
    for m in methods.iter().filter(|m| m.entry == EntryKind::MethodDef) {
        match all.get(&m.token) {
            Some(n) if *n == m.name => checked += 1,
            other => {
                return Err(format!(
                    "{:#x} {}: method_def_names says {other:?}",
                    m.token, m.name
                ))
            }
        }
    }
    let rows = asm
        .metadata()
        .rows(netprobe_core::dotnet::metadata::table::METHOD_DEF) as usize;
    if all.len() != rows || checked == 0 || all.len() <= checked {
        return Err(format!(
            "{} names for {rows} MethodDef rows, {checked} precompiled checked",
            all.len()
        ));
    }
    eprintln!(
        "  .NET {}: {rows} MethodDefs named, {checked} precompiled ones identical to the R2R listing",
        rt.version
    );
    Ok(())
}

/// Every TypeDef name written once for listings (`Assembly::type_names`) is the name written
/// from the metadata each time, with `/` and with `+` between nested types, for every
/// assembly of the framework that has metadata (nested types included: CoreLib has hundreds).
fn type_names_written_once_agree(rt: Runtime) -> Result<(), String> {
    use netprobe_core::dotnet::metadata::{table, Names};
    let (mut assemblies, mut types, mut nested) = (0, 0, 0);
    for path in framework_dlls(rt)? {
        let Ok(asm) = Assembly::open(&path) else {
            continue;
        };
        let plain = Names {
            md: asm.metadata(),
            enclosing: asm.enclosing_types(),
            foreign: None,
            type_names: None,
        };
        let cached = Names {
            type_names: Some(asm.type_names()),
            ..plain
        };
        for rid in 0..=asm.metadata().rows(table::TYPE_DEF) + 1 {
            for sep in ['/', '+', '.'] {
                let (mut want, mut got) = (String::new(), String::new());
                plain.type_def_name(rid, sep, &mut want);
                cached.type_def_name(rid, sep, &mut got);
                if want != got {
                    return Err(format!(
                        "{}: TypeDef {rid} with {sep:?}: {got:?}, want {want:?}",
                        path.display()
                    ));
                }
            }
            types += 1;
            nested += usize::from(
                asm.enclosing_types()
                    .get(rid as usize)
                    .is_some_and(|&e| e != 0),
            );
        }
        assemblies += 1;
    }
    if assemblies < 100 || nested == 0 {
        return Err(format!(
            "only {assemblies} assemblies, {nested} nested types checked"
        ));
    }
    eprintln!(
        "  .NET {}: {types} TypeDef names in {assemblies} assemblies ({nested} nested) agree",
        rt.version
    );
    Ok(())
}

/// A large listing is named on two threads, in chunks taken by whichever thread is free: the
/// methods (`Assembly::methods`) and the symbols (`SymbolSource::symbols`, made on those
/// threads) are those of naming every entry on one thread (`methods_where` keeping all, which
/// names in order), for every ReadyToRun assembly of the framework (CoreLib and
/// System.Linq.Expressions are above the two-thread threshold).
fn listing_on_two_threads_agrees(rt: Runtime) -> Result<(), String> {
    use netprobe_core::symbol::{Address, SymbolSource};
    let (mut assemblies, mut methods, mut largest) = (0, 0, 0);
    for path in framework_dlls(rt)? {
        let Ok(asm) = Assembly::open(&path) else {
            continue;
        };
        let one_thread = asm.methods_where(&|_| true);
        let listed = asm.methods();
        let symbols = Assembly::open(&path).map_err(err)?.symbols();
        let (one_thread, listed, symbols) = match (one_thread, listed, symbols) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(Error::IlOnly { .. }), Err(Error::IlOnly { .. }), Err(Error::IlOnly { .. })) => {
                continue
            }
            (a, b, c) => {
                return Err(format!(
                    "{}: one thread {:?}, listing {:?}, symbols {:?}",
                    path.display(),
                    a.map(|v| v.len()),
                    b.map(|v| v.len()),
                    c.map(|v| v.len())
                ))
            }
        };
        if listed != one_thread {
            let at = listed.iter().zip(&one_thread).position(|(a, b)| a != b);
            return Err(format!(
                "{}: {} methods listed, {} on one thread, first difference at {at:?}",
                path.display(),
                listed.len(),
                one_thread.len()
            ));
        }
        let same = symbols.len() == listed.len()
            && symbols.iter().zip(&listed).all(|(s, m)| {
                s.name == m.name
                    && s.address == Address::Rva(m.rva)
                    && s.size == Some(m.total_size)
                    && s.file_offset == m.file_offset
            });
        if !same {
            return Err(format!(
                "{}: {} symbols differ from the {} methods",
                path.display(),
                symbols.len(),
                listed.len()
            ));
        }
        assemblies += 1;
        methods += listed.len();
        largest = largest.max(listed.len());
    }
    if assemblies < 50 || largest < 20_000 {
        return Err(format!(
            "only {assemblies} ReadyToRun assemblies, the largest with {largest} methods"
        ));
    }
    eprintln!(
        "  .NET {}: {methods} methods of {assemblies} assemblies named alike on one and two threads",
        rt.version
    );
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial("net8_lists_framework_methods", &[NET8.need()], || {
            lists_framework(NET8, 19_000)
        }),
        e2e::trial("net31_lists_framework_methods", &[NET31.need()], || {
            lists_framework(NET31, 15_000)
        }),
        e2e::trial("net8_every_framework_assembly", &[NET8.need()], || {
            whole_framework(NET8)
        }),
        e2e::trial("net31_every_framework_assembly", &[NET31.need()], || {
            whole_framework(NET31)
        }),
        e2e::trial("net8_method_def_names_agree", &[NET8.need()], || {
            method_def_names_agree_with_the_listing(NET8)
        }),
        e2e::trial("net31_method_def_names_agree", &[NET31.need()], || {
            method_def_names_agree_with_the_listing(NET31)
        }),
        e2e::trial("net8_listing_on_two_threads_agrees", &[NET8.need()], || {
            listing_on_two_threads_agrees(NET8)
        }),
        e2e::trial(
            "net31_listing_on_two_threads_agrees",
            &[NET31.need()],
            || listing_on_two_threads_agrees(NET31),
        ),
        e2e::trial("net8_type_names_written_once_agree", &[NET8.need()], || {
            type_names_written_once_agree(NET8)
        }),
        e2e::trial(
            "net31_type_names_written_once_agree",
            &[NET31.need()],
            || type_names_written_once_agree(NET31),
        ),
        e2e::trial("net8_mutated_images_never_panic", &[NET8.need()], || {
            mutations_never_panic(NET8)
        }),
        e2e::trial("net31_mutated_images_never_panic", &[NET31.need()], || {
            mutations_never_panic(NET31)
        }),
        e2e::trial(
            "net8_component_assembly_is_explained",
            &[NET8.need()],
            || component_assembly_is_explained(NET8),
        ),
        e2e::trial("net8_system_console_snapshot", &[NET8.need()], || {
            snapshot(NET8)
        }),
        e2e::trial("net31_system_console_snapshot", &[NET31.need()], || {
            snapshot(NET31)
        }),
    ]);
}
