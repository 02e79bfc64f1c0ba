//! Native ELF code (C, C++, Rust, cgo's C in Go binaries, .NET NativeAOT's exported entry
//! points): the C convention of the file's architecture (System V on x86-64, AAPCS64 on
//! aarch64, by its ELF `e_machine`, never the host's), an entry uprobe at the first byte, a
//! uretprobe for returns (native stacks never move, so uretprobes are safe), latency paired by
//! thread.
//!
//! ELF details users hit:
//! - A shared library is probed in the file itself (`uprobe_events` takes the library's path and
//!   a file offset); the kernel then fires the probe in every process that maps it, and the
//!   session's pid filter keeps the targeted ones (`Documentation/trace/uprobetracer.rst`: a uprobe is set on
//!   an inode and offset).
//! - A GNU IFUNC symbol names its *resolver*: a probe there fires when the symbol is bound, not
//!   on calls. netprobe says so, and with `-p` reads which implementation the process bound
//!   ([`netprobe_core::elf::ifunc::resolve_ifunc`]) and offers a spec that probes it.
//! - Files of a process in another mount namespace (containers) are opened through
//!   `/proc/PID/root` by the resolver; NativeAOT code in a `__managedcode` section is placed by
//!   the segment formula like any code outside `.text`.

use crate::error::{Error, Result};
use crate::lang::Wants;
use crate::plan::{FunctionPlan, PairingKey, Returns};
use crate::spec::{Location, ProbeSpec};
use netprobe_core::abi::CallingConvention;
use netprobe_core::arch::Arch;
use netprobe_core::elf::ifunc::{resolve_ifunc, IfuncTarget};
use netprobe_core::process::Process;
use netprobe_core::symbol::{Address, SymbolKind};

/// The architecture of the ELF file at `loc` (its `e_machine`). A file that cannot be read as
/// ELF here is planned for the host's; a machine netprobe has no rules for is refused.
pub fn image_arch(spec: &ProbeSpec, loc: &Location) -> Result<Arch> {
    let Some(view) = netprobe_core::elf::ElfFile::open(&loc.probe_path).ok() else {
        return Ok(Arch::host().unwrap_or(Arch::X86_64));
    };
    let Ok(elf) = view.view() else {
        return Ok(Arch::host().unwrap_or(Arch::X86_64));
    };
    elf.arch().ok_or_else(|| Error::BadSpec {
        spec: spec.text.clone(),
        why: format!(
            "{} is built for ELF machine {}, which netprobe has no rules for (it knows x86_64 and aarch64)",
            loc.probe_path.display(),
            elf.header.e_machine
        ),
    })
}

/// For an `IMAGE:0xOFFSET` probe whose arguments go past the C convention's registers: the entry
/// of the ELF function that contains the offset when the offset is inside it (not its first
/// byte), so that the planner refuses stack arguments there (the stack pointer has moved since
/// entry). `None` otherwise.
fn stack_args_function_start(
    spec: &ProbeSpec,
    loc: &Location,
    wants: Wants,
    convention: CallingConvention,
) -> Option<netprobe_core::addr::FileOffset> {
    if !wants.args || !matches!(spec.target, crate::spec::SpecTarget::Offset(_)) {
        return None;
    }
    let words: usize = spec
        .args
        .iter()
        .map(crate::plan::ArgRequest::positional_words)
        .sum();
    if words <= convention.int_registers().len() {
        return None;
    }
    let off = loc.file_offset.0;
    netprobe_core::image::load_symbols(&loc.probe_path)
        .ok()?
        .into_iter()
        .find_map(|s| {
            let start = s.file_offset?.0;
            (start < off && off - start < s.size?).then_some(netprobe_core::addr::FileOffset(start))
        })
}

/// The plan of a native function at `loc`. `notes` receives what the user should know (IFUNC
/// resolvers); `pids` are the `-p` processes, in which IFUNCs are looked up. Errors: an ELF
/// file of a machine netprobe has no rules for.
pub fn plan_function(
    spec: &ProbeSpec,
    loc: &Location,
    wants: Wants,
    pids: &[u32],
    notes: &mut Vec<String>,
) -> Result<FunctionPlan> {
    let convention = CallingConvention::native(image_arch(spec, loc)?);
    if loc.kind() == Some(SymbolKind::Ifunc) {
        notes.extend(ifunc_notes(loc, pids));
    }
    Ok(FunctionPlan {
        name: loc.name.clone(),
        image: loc.image.clone(),
        probe_path: loc.probe_path.clone(),
        function_offset: stack_args_function_start(spec, loc, wants, convention)
            .unwrap_or(loc.file_offset),
        entry_offsets: if wants.entry {
            vec![loc.file_offset]
        } else {
            vec![]
        },
        returns: if wants.ret {
            Returns::UretProbe
        } else {
            Returns::None
        },
        convention,
        args: if wants.args {
            spec.args.clone()
        } else {
            vec![]
        },
        ret: spec.ret,
        pairing: PairingKey::Thread,
        symbol: loc.symbol.as_ref().map(|s| s.name.clone()),
    })
}

/// What to say about an IFUNC location: that the probe lands on the resolver, and where the
/// calls go in each `-p` process where that can be read.
pub fn ifunc_notes(loc: &Location, pids: &[u32]) -> Vec<String> {
    let image_name = loc
        .image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| loc.image.display().to_string());
    let mut out = vec![format!(
        "warning: {} in {image_name} is an IFUNC: the probe lands on its resolver, which runs once when the symbol is bound, not on each call",
        loc.name
    )];
    let Some(Address::Virt(resolver)) = loc.symbol.as_ref().map(|s| s.address) else {
        return out;
    };
    if pids.is_empty() {
        out.push(format!(
            "note: the implementation {} resolves to depends on the CPU; run with -p PID to find the one a process uses",
            loc.name
        ));
        return out;
    }
    let mut found: Vec<(u32, IfuncTarget)> = Vec::new();
    for &pid in pids {
        let Ok(process) = Process::open(pid) else {
            continue;
        };
        if let Ok(Some(t)) = resolve_ifunc(&process, &loc.image, &loc.name, resolver) {
            found.push((pid, t));
        }
    }
    if found.is_empty() {
        out.push(format!(
            "note: no bound GOT slot for {} was found in pid {} (not called yet?), so its implementation is unknown",
            loc.name,
            pids.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    for (pid, t) in found {
        out.push(implementation_note(&loc.name, pid, &t));
    }
    out
}

/// `in pid P, strlen resolved to __strlen_avx2 (libc.so.6+0x...): probe it with 'libc.so.6:...'`.
pub fn implementation_note(symbol: &str, pid: u32, t: &IfuncTarget) -> String {
    let file = t
        .image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| t.image.display().to_string());
    let what = match &t.name {
        Some(n) => format!("{n} ({file} at file offset {})", t.file_offset),
        None => format!(
            "{file} at file offset {} (no symbol names it)",
            t.file_offset
        ),
    };
    let spec = match &t.name {
        Some(n) if !n.contains(' ') => format!("'{file}:{n}' or '{file}:{}'", t.file_offset),
        _ => format!("'{file}:{}'", t.file_offset),
    };
    format!("in pid {pid}, {symbol} resolved to {what}: probe {spec} to see the calls")
}

#[cfg(test)]
mod tests {
    use super::*;
    use netprobe_core::addr::{FileOffset, RuntimeAddr, VirtAddr};
    use netprobe_core::elf::ifunc::SlotKind;
    use netprobe_core::symbol::{Symbol, SymbolOrigin};

    fn strlen() -> Location {
        Location {
            name: "strlen@@GLIBC_2.2.5".into(),
            image: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            probe_path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            file_offset: FileOffset(0x9e8e0),
            symbol: Some(Symbol {
                name: "strlen@@GLIBC_2.2.5".into(),
                kind: SymbolKind::Ifunc,
                origin: SymbolOrigin::ElfDynsym,
                address: Address::Virt(VirtAddr(0x9e8e0)),
                size: Some(113),
                file_offset: Some(FileOffset(0x9e8e0)),
            }),
        }
    }

    #[test]
    fn ifunc_without_a_process_says_where_the_probe_lands() {
        let notes = ifunc_notes(&strlen(), &[]);
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("strlen@@GLIBC_2.2.5 in libc.so.6 is an IFUNC"));
        assert!(notes[1].contains("run with -p PID"));
        let spec = ProbeSpec::parse("libc.so.6:strlen").unwrap();
        let wants = Wants {
            entry: true,
            ret: true,
            args: false,
            pair: false,
        };
        let mut notes = Vec::new();
        let plan = plan_function(&spec, &strlen(), wants, &[], &mut notes).unwrap();
        assert_eq!(plan.returns, Returns::UretProbe);
        assert_eq!(plan.entry_offsets, vec![FileOffset(0x9e8e0)]);
        assert_eq!(notes.len(), 2);
    }

    #[test]
    fn implementation_notes_offer_a_spec() {
        let mut t = IfuncTarget {
            image: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            probe_path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            file_offset: FileOffset(0x167ac0),
            runtime_addr: RuntimeAddr(0x7f00_0016_7ac0),
            name: None,
            slot_image: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            slot: SlotKind::Irelative,
        };
        assert_eq!(
            implementation_note("strlen", 42, &t),
            "in pid 42, strlen resolved to libc.so.6 at file offset 0x167ac0 (no symbol names it): probe 'libc.so.6:0x167ac0' to see the calls"
        );
        t.name = Some("__strlen_avx2".into());
        assert!(implementation_note("strlen", 42, &t)
            .ends_with("probe 'libc.so.6:__strlen_avx2' or 'libc.so.6:0x167ac0' to see the calls"));
    }
}
