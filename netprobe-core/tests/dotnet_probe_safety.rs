//! The probe-safety gate on ReadyToRun code of the real .NET 8 and .NET Core 3.1 framework: every
//! planned probe passes, mutated entries are refused.
//!
//! A missing runtime skips a trial outside CI and fails it under CI=true.

mod dotnet_runtime;

use dotnet_runtime::{list, Runtime, NET31, NET8};
use fixtures::e2e::{self, err};
use netprobe_core::dotnet::{Assembly, R2rMethod};

/// The probes netprobe plans for a method (its entry, each RET of its main body), as the CLI's
/// .NET planner computes them (`netprobe_cli::lang::dotnet::exits` scans with `x86::scan`).
fn planned_r2r_probes(
    asm: &Assembly,
    m: &R2rMethod,
) -> Option<Vec<netprobe_core::probe_safety::ProbeRequest>> {
    use netprobe_core::addr::{FileOffset, VirtAddr};
    use netprobe_core::probe_safety::ProbeRequest;
    let start = m.file_offset?;
    let code = asm
        .bytes()
        .get(start.0 as usize..(start.0 + m.size) as usize)?;
    let rets = netprobe_core::arch::x86_64::scan(code, VirtAddr(m.rva.0)).rets;
    let planned = |o| ProbeRequest {
        offset: o,
        planned_entry: Some(start),
        uretprobe: false,
    };
    Some(
        std::iter::once(start)
            .chain(rets.iter().map(|r| FileOffset(start.0 + (r.0 - m.rva.0))))
            .map(planned)
            .collect(),
    )
}

/// The probe-safety gate on the framework's ReadyToRun images: every probe netprobe plans
/// for every method of CoreLib and System.Console passes; an image whose RUNTIME_FUNCTION puts
/// a method's entry one byte into its first instruction (readytorun-format.md: x64 entries are
/// begin, end, unwind RVAs) still parses, and every probe planned from it is refused.
fn gate_on_r2r(rt: Runtime) -> Result<(), String> {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, Refusal};
    for name in ["System.Private.CoreLib", "System.Console"] {
        let (asm, methods) = list(rt, name)?;
        let requests: Vec<_> = methods
            .iter()
            .filter_map(|m| planned_r2r_probes(&asm, m))
            .flatten()
            .collect();
        let file = CodeFile::open(&rt.dll(name)).map_err(err)?;
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            if let Err(e) = r {
                return Err(format!(
                    "{name}: planned probe at {} refused: {e}",
                    q.offset
                ));
            }
        }
    }
    let path = rt.dll("System.Console");
    let (asm, methods) = list(rt, "System.Console")?;
    // A method entry that no RUNTIME_FUNCTION begins at (one byte in) is refused as such.
    let m = methods.first().ok_or("no methods")?;
    let inside = netprobe_core::addr::FileOffset(m.file_offset.ok_or("no offset")?.0 + 1);
    let r =
        CodeFile::open(&path)
            .map_err(err)?
            .check(&[netprobe_core::probe_safety::ProbeRequest {
                offset: inside,
                planned_entry: Some(inside),
                uretprobe: false,
            }]);
    if !matches!(r[0], Err(Refusal::NoRuntimeFunction { .. })) {
        return Err(format!("{}+1: {:?}", m.name, r[0]));
    }
    let original = std::fs::read(&path).map_err(err)?;
    let mut tried = 0;
    for m in methods.iter().step_by(2) {
        let Some(start) = m.file_offset else { continue };
        let first = netprobe_core::arch::x86_64::instructions(
            &original[start.0 as usize..],
            netprobe_core::addr::VirtAddr(0),
        )
        .next();
        if first.is_none_or(|i| i.len() < 2) {
            continue;
        }
        let mut bytes = original.clone();
        let at = asm
            .runtime_function_file_offset(m.runtime_function)
            .ok_or("RUNTIME_FUNCTION outside the file")?
            .0 as usize;
        let begin = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if u64::from(begin) != m.rva.0 {
            return Err(format!("{}: RUNTIME_FUNCTION begin {begin:#x}", m.name));
        }
        bytes[at..at + 4].copy_from_slice(&(begin + 1).to_le_bytes());
        let Ok(mutated) = Assembly::parse(&path, bytes.clone()) else {
            continue; // refused at parse: nothing would be probed
        };
        let Some(moved) = mutated
            .methods()
            .map_err(err)?
            .into_iter()
            .find(|n| n.runtime_function == m.runtime_function && n.name == m.name)
        else {
            continue;
        };
        if moved.rva.0 != m.rva.0 + 1 {
            return Err(format!("{}: mutation did not move the entry", m.name));
        }
        let requests = planned_r2r_probes(&mutated, &moved).ok_or("no probes")?;
        let file = CodeFile::from_bytes(&path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            match r {
                Ok(_) => {
                    return Err(format!(
                        "{}: probe at {} (entry moved to RVA {}) passed the gate",
                        m.name, q.offset, moved.rva
                    ))
                }
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
        return Err(format!("only {tried} methods mutated"));
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "net8_gate_passes_planned_refuses_mutated",
            &[NET8.need()],
            || gate_on_r2r(NET8),
        ),
        e2e::trial(
            "net31_gate_passes_planned_refuses_mutated",
            &[NET31.need()],
            || gate_on_r2r(NET31),
        ),
    ]);
}
