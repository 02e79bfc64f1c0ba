//! The probe-safety gate on Go binaries: every probe the planner places on the sample app, on
//! esbuild and on Debian's Go binaries passes it; a mutated entry or a shifted text start is
//! refused. Needs Go and a C compiler (the sample app), objcopy and objdump, and the fetched
//! esbuild builds and Debian's dockerd/containerd/runc for those rows.

mod go_checks;

use fixtures::e2e::{self, err, Need};
use fixtures::go::{sample_app_variants, third_party_go_dir, SAMPLE_VARIANTS, THIRD_PARTY_GO};
use go_checks::{DEBIAN_GO, R};
use netprobe_core::addr::VirtAddr;
use netprobe_core::golang::GoBinary;
use std::path::Path;

/// Every probe netprobe plans for every function of `path` (first byte, after the stack-check
/// prologue, each RET) passes the gate.
fn gate_passes_planned(path: &Path) -> R {
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest};
    let bytes = std::fs::read(path).map_err(err)?;
    let go = GoBinary::parse(path, &bytes)
        .map_err(err)?
        .ok_or_else(|| format!("{}: not Go", path.display()))?;
    let mut requests = Vec::new();
    for f in go.functions() {
        let Some(points) = go.probe_points(&f) else {
            continue;
        };
        let Some(entry) = points.entry.file_offset else {
            continue;
        };
        let planned = |o| ProbeRequest {
            offset: o,
            planned_entry: Some(entry),
            uretprobe: false,
        };
        requests.push(planned(entry));
        requests.extend(points.entry_probe.file_offset.map(planned));
        requests.extend(
            points
                .rets
                .iter()
                .filter_map(|r| r.file_offset)
                .map(planned),
        );
    }
    if requests.len() < 1000 {
        return Err(format!(
            "{}: only {} probe points",
            path.display(),
            requests.len()
        ));
    }
    let file = CodeFile::open(path).map_err(err)?;
    let refused: Vec<String> = requests
        .iter()
        .zip(file.check(&requests))
        .filter_map(|(q, r)| r.err().map(|e| format!("{}: {e}", q.offset)))
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "{}: {} of {} planned probes refused, e.g. {:?}",
            path.display(),
            refused.len(),
            requests.len(),
            &refused[..refused.len().min(3)]
        ));
    }
    Ok(())
}

/// Moves function `i`'s entry by `delta` bytes in both places the table states it
/// ([`netprobe_core::golang::Pclntab::entry_fields`]), so the table still parses.
fn move_entry(bytes: &mut [u8], go: &GoBinary<'_>, i: u64, delta: u64) -> R {
    let table = go.pclntab_location().file_offset.0;
    let (fields, size) = go.pclntab().entry_fields(i).ok_or("no entry fields")?;
    for f in fields {
        let at = (table + f) as usize;
        let word = bytes.get_mut(at..at + size).ok_or("out of bounds")?;
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(word);
        let moved = u64::from_le_bytes(v) + delta;
        word.copy_from_slice(&moved.to_le_bytes()[..size]);
    }
    Ok(())
}

/// A mutated image whose table puts a function's entry one byte into its first instruction
/// (every 97th function whose first instruction is longer than a byte, up to 25): the table
/// still parses, and the gate refuses every probe netprobe would plan from it (first byte,
/// post-prologue, RETs), never lets one through.
fn gate_refuses_mutated_entries(path: &Path) -> R {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let original = std::fs::read(path).map_err(err)?;
    let go = GoBinary::parse(path, &original)
        .map_err(err)?
        .ok_or("not Go")?;
    let mut tried = 0;
    for (i, f) in go.functions().enumerate().skip(1).step_by(97) {
        let Some(code) = go.code(&f) else { continue };
        let first = netprobe_core::arch::x86_64::instructions(code, f.entry).next();
        if first.is_none_or(|ins| ins.len() < 2) {
            continue;
        }
        let mut bytes = original.clone();
        move_entry(&mut bytes, &go, i as u64, 1)?;
        let Some(mutated) = GoBinary::parse(path, &bytes).ok().flatten() else {
            continue; // refused at parse: nothing would be probed
        };
        let Some(g) = mutated.function_at(VirtAddr(f.entry.0 + 1)) else {
            return Err(format!("{}: mutated function not found", f.name));
        };
        if g.entry.0 != f.entry.0 + 1 || g.name != f.name {
            return Err(format!("{}: mutation did not move the entry", f.name));
        }
        let Some(points) = mutated.probe_points(&g) else {
            continue;
        };
        let entry = points.entry.file_offset.ok_or("no offset")?;
        let requests: Vec<ProbeRequest> = [Some(points.entry), Some(points.entry_probe)]
            .into_iter()
            .flatten()
            .chain(points.rets.iter().copied())
            .filter_map(|p| p.file_offset)
            .map(|o| ProbeRequest {
                offset: o,
                planned_entry: Some(entry),
                uretprobe: false,
            })
            .collect();
        drop(mutated);
        let file = CodeFile::from_bytes(path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            match r {
                Ok(_) => {
                    return Err(format!(
                        "{}: probe at {} of {} (entry moved to {entry}) passed the gate",
                        path.display(),
                        q.offset,
                        f.name
                    ))
                }
                // Refused for what the mutation broke, not because the file went unreadable.
                Err(Refusal::Unreadable(e)) => return Err(e),
                Err(_) => {}
            }
        }
        tried += 1;
        if tried == 25 {
            break;
        }
    }
    if tried < 10 {
        return Err(format!(
            "{}: only {tried} functions mutated",
            path.display()
        ));
    }
    Ok(())
}

/// A table read with a wrong text start (the header's `textStart` moved by 16 bytes and by a
/// page, as a misread of Go 1.26's zero field would): every function's entry misses its code,
/// and the gate refuses every probe planned from it, even for functions whose shifted entry
/// happens to look like code. A shift that moves an entry out of the executable segments is
/// already rejected by the text-start rule (which then takes the right value from the module
/// data); at least one shift must get past it to the gate.
fn gate_refuses_shifted_text_start(path: &Path) -> R {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let original = std::fs::read(path).map_err(err)?;
    let (field, start) = {
        let go = GoBinary::parse(path, &original)
            .map_err(err)?
            .ok_or("not Go")?;
        let h = go.pclntab().header();
        if !h.version.entries_are_text_offsets() || go.pclntab().text_start() == 0 {
            return Err(format!(
                "{}: not a 1.18+ table with a text start",
                path.display()
            ));
        }
        // `runtime/symtab.go` pcHeader: magic u32, pad1, pad2, minLC, ptrSize u8, nfunc int,
        // nfiles uint, textStart uintptr.
        let at = go.pclntab_location().file_offset.0 as usize + 8 + 2 * usize::from(h.ptr_size);
        (at, go.pclntab().text_start())
    };
    let (mut caught_by_rule, mut reached_gate) = (0, 0);
    for shift in [0x10u64, 0x1000] {
        let mut bytes = original.clone();
        bytes[field..field + 8].copy_from_slice(&(start + shift).to_le_bytes());
        let go = GoBinary::parse(path, &bytes)
            .map_err(err)?
            .ok_or("not Go")?;
        if go.pclntab().text_start() != start + shift {
            // The text-start rule itself rejected the shifted header word (a function entry
            // left the executable segments) and took the value from another source: nothing
            // wrong can be planned from it.
            if go.pclntab().text_start() != start {
                return Err(format!(
                    "shift {shift:#x}: text start {:#x}, neither the shifted {:#x} nor the right {start:#x}",
                    go.pclntab().text_start(),
                    start + shift
                ));
            }
            caught_by_rule += 1;
            continue;
        }
        reached_gate += 1;
        let mut requests = Vec::new();
        for f in go.functions().filter(|f| f.name.starts_with("main.")) {
            let Some(p) = go.probe_points(&f) else {
                continue;
            };
            let Some(entry) = p.entry.file_offset else {
                continue;
            };
            requests.extend(
                [p.entry, p.entry_probe]
                    .iter()
                    .chain(&p.rets)
                    .filter_map(|q| q.file_offset)
                    .map(|o| ProbeRequest {
                        offset: o,
                        planned_entry: Some(entry),
                        uretprobe: false,
                    }),
            );
        }
        if requests.len() < 10 {
            return Err(format!(
                "shift {shift:#x}: only {} probes planned",
                requests.len()
            ));
        }
        drop(go);
        let file = CodeFile::from_bytes(path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            if !matches!(r, Err(Refusal::PclntabMisaligned { .. })) {
                return Err(format!(
                    "{} shifted by {shift:#x}: probe at {} not refused as misaligned: {r:?}",
                    path.display(),
                    q.offset
                ));
            }
        }
    }
    // The small shift keeps every entry inside the code, so the rule takes it and only the
    // gate's alignment check can tell.
    if reached_gate == 0 {
        return Err(format!(
            "{}: every shift was caught by the text-start rule ({caught_by_rule}); the gate's check was not exercised",
            path.display()
        ));
    }
    Ok(())
}

fn main() {
    let build = || vec![Need::Go, Need::CCompiler];
    let mut debian = vec![Need::Go, Need::Program("objcopy"), Need::Program("objdump")];
    debian.extend(DEBIAN_GO.iter().map(|p| Need::Path(p.into())));
    let mut esbuild = vec![Need::Go, Need::Program("objdump")];
    esbuild.extend(
        THIRD_PARTY_GO
            .iter()
            .map(|(f, _)| Need::Path(third_party_go_dir().join(f))),
    );
    e2e::run(vec![
        e2e::trial("gate_passes_every_planned_probe::sample", &build(), || {
            let dir = sample_app_variants();
            SAMPLE_VARIANTS
                .iter()
                .try_for_each(|v| gate_passes_planned(&dir.join(v)))
        }),
        e2e::trial("gate_passes_every_planned_probe::esbuild", &esbuild, || {
            THIRD_PARTY_GO
                .iter()
                .try_for_each(|(f, _)| gate_passes_planned(&third_party_go_dir().join(f)))
        }),
        e2e::trial("gate_passes_every_planned_probe::debian", &debian, || {
            DEBIAN_GO
                .iter()
                .try_for_each(|p| gate_passes_planned(Path::new(p)))
        }),
        e2e::trial("gate_refuses_mutated_entries::sample", &build(), || {
            let dir = sample_app_variants();
            SAMPLE_VARIANTS
                .iter()
                .try_for_each(|v| gate_refuses_mutated_entries(&dir.join(v)))
        }),
        e2e::trial("gate_refuses_shifted_text_start::sample", &build(), || {
            let dir = sample_app_variants();
            ["sampleapp-default", "sampleapp-stripped"]
                .iter()
                .try_for_each(|v| gate_refuses_shifted_text_start(&dir.join(v)))
        }),
        e2e::trial("gate_refuses_mutated_entries::esbuild", &esbuild, || {
            THIRD_PARTY_GO
                .iter()
                .try_for_each(|(f, _)| gate_refuses_mutated_entries(&third_party_go_dir().join(f)))
        }),
    ]);
}
