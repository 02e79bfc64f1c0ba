//! Go: how the functions of a Go binary are probed.
//!
//! - **Entry** probes go after the stack-check prologue
//!   ([`netprobe_core::golang::ProbePoints::entry_probe`]): when a goroutine's stack is too small,
//!   the prologue calls `runtime.morestack`, which re-enters the function from its first byte, so
//!   a probe there fires twice for one call (Go `src/runtime/stack.go`, `newstack`). Arguments are
//!   still where the ABI put them after the prologue: it only compares SP with the stack guard.
//! - **Return** probes are plain uprobes on every RET instruction, reading the result where the
//!   ABI leaves it. A uretprobe replaces the return address on the goroutine stack with the
//!   kernel's trampoline; when the runtime copies or walks that stack (growth, GC, panics) it
//!   meets an address it does not know and kills the program (`unexpected return pc`,
//!   `fatal error: unknown caller pc`; Go `src/runtime/traceback.go`; the crash the hand-written
//!   Go `.text`-formula recipe met on kube-controller-manager). `--force-uretprobe` brings the
//!   uretprobe back, with a loud warning.
//! - **Arguments** by the ABI of the Go release that built the binary
//!   ([`GoBinary::abi`]: the register ABI since Go 1.17, the stack ABI before).
//! - **Latency pairing**: by the goroutine (R14 holds `g` under the register ABI, at entry and at
//!   every RET); under the stack ABI `g` is in thread-local storage, which probes cannot read, so
//!   calls are paired by thread, which mis-pairs a call whose goroutine moves to another thread
//!   while it runs.
//!
//! Known limit: Go assembly functions written for `ABI0` (most assembly outside the runtime, e.g.
//! `internal/bytealg.IndexByteString`, which an unstripped binary's symbol table calls
//! `...IndexByteString.abi0`) take their arguments on the stack even in register-ABI binaries,
//! and need not keep `g` in R14; the pclntab does not tell them apart from `ABIInternal`
//! assembly, so netprobe applies the binary's ABI to them. Raw fetch-args (`a=+8(%sp):s64`) read
//! their arguments.

use crate::error::{Error, Result};
use crate::lang::Wants;
use crate::plan::{FunctionPlan, PairingKey, Returns};
use crate::spec::{Location, ProbeSpec, SpecTarget};
use netprobe_core::abi::CallingConvention;
use netprobe_core::addr::{FileOffset, VirtAddr};
use netprobe_core::arch::Arch;
use netprobe_core::golang::{GoAbi, GoBinary, GoVersion};
use netprobe_core::symbol::{Address, SymbolKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What planning needs to know about one Go function, read once from its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoFunctionFacts {
    /// The name in the pclntab.
    pub name: String,
    /// The first byte.
    pub entry: VirtAddr,
    pub entry_offset: FileOffset,
    /// Where an entry probe counts each call once (after the stack check, or the entry).
    pub entry_probe: VirtAddr,
    pub entry_probe_offset: FileOffset,
    /// Whether a stack-check prologue was recognised (else the function is NOSPLIT or its
    /// prologue has an unknown shape; then a first-byte probe counts each call once anyway, as
    /// nothing re-enters it).
    pub has_stack_check: bool,
    /// Every RET: address and file offset.
    pub rets: Vec<(VirtAddr, FileOffset)>,
    /// Direct jumps out of the function (tail calls): returns that pass no RET of it.
    pub tail_jumps: Vec<VirtAddr>,
    /// The `args` field of the function's record (stack ABI: the in/out area, results last).
    pub args_size: Option<u32>,
    /// Whether an instruction between the entry and the entry probe may change RSP: then the
    /// stack ABI's `8*i(%sp)` no longer names the arguments there.
    pub sp_moves_before_entry_probe: bool,
}

impl GoFunctionFacts {
    /// Offset of `off` from the function's first byte.
    pub fn delta(&self, off: FileOffset) -> u64 {
        off.0.wrapping_sub(self.entry_offset.0)
    }
}

/// One Go image: its build and the functions the locations name.
#[derive(Clone, Debug)]
pub struct GoImage {
    pub path: PathBuf,
    /// From `.go.buildinfo`; `None` when the binary has none.
    pub version: Option<GoVersion>,
    /// The table layout's oldest Go release (what is known without build info).
    pub version_lower_bound: GoVersion,
    pub abi: GoAbi,
    /// The architecture the binary was built for (its ELF `e_machine`): which registers the
    /// ABI uses.
    pub arch: Arch,
    /// By the file offset of the location that asked for it.
    functions: HashMap<u64, GoFunctionFacts>,
}

impl GoImage {
    /// `go1.19.8`, or `go1.16+` when only the table layout tells.
    pub fn version_label(&self) -> String {
        match &self.version {
            Some(v) => v.raw.clone(),
            None => format!("{}+", self.version_lower_bound),
        }
    }

    /// The function a location names, when it is code of this image's function table.
    pub fn function_at_offset(&self, off: FileOffset) -> Option<&GoFunctionFacts> {
        self.functions.get(&off.0)
    }
}

/// Go facts of every image that the locations of one command name, read once per image.
#[derive(Debug, Default)]
pub struct GoImages {
    images: HashMap<PathBuf, GoImage>,
}

/// Whether a location may be Go code: a pclntab function, or a bare offset (which may lie in a
/// Go function). ELF functions of a Go binary (cgo's C code) are native.
fn may_be_go(loc: &Location) -> bool {
    match loc.kind() {
        Some(SymbolKind::GoFunction) | None => true,
        Some(_) => false,
    }
}

impl GoImages {
    /// Opens each distinct probe path among `locations` that may hold Go code, once, and
    /// decodes the functions at the locations. Files that are not Go binaries (or cannot be
    /// read) are left out: their locations are planned as native code.
    pub fn analyze<'a>(locations: impl IntoIterator<Item = &'a Location>) -> GoImages {
        let mut by_path: HashMap<&Path, Vec<&Location>> = HashMap::new();
        for loc in locations.into_iter().filter(|l| may_be_go(l)) {
            by_path.entry(&loc.probe_path).or_default().push(loc);
        }
        let mut images = HashMap::new();
        for (path, locs) in by_path {
            if let Some(img) = read_image(path, &locs) {
                images.insert(path.to_path_buf(), img);
            }
        }
        GoImages { images }
    }

    /// Whether `probe_path` is a Go binary among those analyzed.
    pub fn contains(&self, probe_path: &Path) -> bool {
        self.images.contains_key(probe_path)
    }

    /// The Go image and function of a location; `None` for native code.
    pub fn function(&self, loc: &Location) -> Option<(&GoImage, &GoFunctionFacts)> {
        if !may_be_go(loc) {
            return None;
        }
        let img = self.images.get(&loc.probe_path)?;
        Some((img, img.function_at_offset(loc.file_offset)?))
    }
}

/// Reads the Go facts of `path` for `locs`; `None` when it is not a Go binary.
fn read_image(path: &Path, locs: &[&Location]) -> Option<GoImage> {
    // The Go tables the resolver and the probe-safety gate use too: parsed once per run.
    netprobe_core::image::cached::image(path)
        .ok()?
        .with_go(path, |bin| read_functions(path, bin?, locs))
        .ok()?
}

/// The facts the planner needs of each location's function in the Go binary `bin`.
fn read_functions(path: &Path, bin: &GoBinary<'_>, locs: &[&Location]) -> Option<GoImage> {
    // A machine netprobe has no rules for is no Go image it can plan.
    let arch = bin.arch()?;
    let mut functions = HashMap::new();
    for loc in locs {
        let vaddr = match loc.symbol.as_ref().map(|s| s.address) {
            Some(Address::Virt(v)) => Some(v),
            _ => vaddr_of_offset(bin, loc.file_offset),
        };
        let Some(f) = vaddr.and_then(|v| bin.function_at(v)) else {
            continue;
        };
        let Some(points) = bin.probe_points(&f) else {
            continue;
        };
        let (Some(entry_offset), Some(entry_probe_offset)) =
            (points.entry.file_offset, points.entry_probe.file_offset)
        else {
            continue;
        };
        let sp_moves = bin
            .code(&f)
            .zip(bin.arch())
            .map(|(code, arch)| {
                arch.stack_pointer_written(code, points.entry.vaddr, points.entry_probe.vaddr)
            })
            .unwrap_or(true);
        functions.insert(
            loc.file_offset.0,
            GoFunctionFacts {
                name: f.name.to_string(),
                entry: points.entry.vaddr,
                entry_offset,
                entry_probe: points.entry_probe.vaddr,
                entry_probe_offset,
                has_stack_check: points.stack_check.is_some(),
                rets: points
                    .rets
                    .iter()
                    .filter_map(|r| Some((r.vaddr, r.file_offset?)))
                    .collect(),
                tail_jumps: points.tail_jumps.clone(),
                args_size: f.args_size,
                sp_moves_before_entry_probe: sp_moves,
            },
        );
    }
    Some(GoImage {
        path: path.to_path_buf(),
        version: bin.version(),
        version_lower_bound: bin.version_lower_bound(),
        abi: bin.abi(),
        arch,
        functions,
    })
}

/// The link-time address of code at file offset `off` (inverse of the segment formula over the
/// executable segment holding it).
fn vaddr_of_offset(bin: &GoBinary<'_>, off: FileOffset) -> Option<VirtAddr> {
    bin.segments().code_vaddr_of_file_offset(off)
}

/// What the Go planner did over one command, for the summary lines on stderr.
#[derive(Debug, Default)]
pub struct GoSummary {
    /// Functions whose returns are observed by RET probes.
    pub ret_probed: Vec<String>,
    /// Functions given uretprobes because of `--force-uretprobe`.
    pub forced_uretprobes: Vec<String>,
    /// Functions paired by thread for latency (stack ABI).
    pub thread_paired: Vec<(String, String)>,
    /// Functions whose entry probe moved past the stack check.
    pub after_prologue: usize,
}

/// Whether positional arguments `args` need more than the register ABI's integer registers on
/// `arch` (amd64 9, arm64 16), so that some are read from the stack (relative to the entry stack
/// pointer).
fn overflows_registers(args: &[crate::plan::ArgRequest], arch: Arch) -> bool {
    let words: usize = args
        .iter()
        .map(crate::plan::ArgRequest::positional_words)
        .sum();
    words > CallingConvention::GoRegAbi { arch }.int_registers().len()
}

/// The plan of one Go function at `loc` (see the module doc for the rules). `notes` receives
/// per-function warnings; `summary` what [`GoSummary::notes`] reports once. `Ok(None)` when
/// nothing can be probed (no RET for a return-only probe; the reason is in `notes`).
///
/// Errors: a return probe asked at an offset inside a function (a return belongs to a call,
/// which starts at the entry).
#[allow(clippy::too_many_arguments)]
pub fn plan_function(
    img: &GoImage,
    f: &GoFunctionFacts,
    spec: &ProbeSpec,
    loc: &Location,
    wants: Wants,
    force_uretprobe: bool,
    notes: &mut Vec<String>,
    summary: &mut GoSummary,
) -> Result<Option<FunctionPlan>> {
    let arch = img.arch;
    let convention = match img.abi {
        GoAbi::Register => CallingConvention::GoRegAbi { arch },
        GoAbi::Stack => CallingConvention::GoStackAbi {
            arch,
            args_size: f.args_size,
        },
    };
    // Only a mode that pairs calls reads the goroutine.
    let pairing = match img.abi {
        GoAbi::Register if wants.pair => {
            PairingKey::Register(convention.conventions().go_goroutine)
        }
        _ => PairingKey::Thread,
    };
    let exact = matches!(spec.target, SpecTarget::Offset(_));
    let name = &loc.name;

    let entry_offsets = if !wants.entry {
        vec![]
    } else if exact {
        // An offset the user typed is probed exactly there; say what that means.
        if loc.file_offset == f.entry_offset && f.has_stack_check {
            notes.push(format!(
                "warning: {} is the first byte of Go function {}: a probe there fires twice for a call whose stack grows (morestack re-enters it); probe {} by name, or at {}, to count each call once",
                loc.file_offset, f.name, f.name, f.entry_probe_offset
            ));
        } else if loc.file_offset != f.entry_offset && loc.file_offset != f.entry_probe_offset {
            notes.push(format!(
                "note: {} is {:#x} bytes into Go function {}: arguments are read from where the {} puts them at entry, which the code may have changed by then",
                loc.file_offset,
                f.delta(loc.file_offset),
                f.name,
                convention.label()
            ));
        }
        vec![loc.file_offset]
    } else if (img.abi == GoAbi::Stack || (wants.args && overflows_registers(&spec.args, arch)))
        && f.sp_moves_before_entry_probe
    {
        notes.push(format!(
            "warning: {}: the stack pointer may change before the end of its stack check, so its stack-ABI arguments are read at the first byte, where a call whose stack grows is seen twice",
            f.name
        ));
        vec![f.entry_offset]
    } else {
        if f.entry_probe_offset != f.entry_offset {
            summary.after_prologue += 1;
        }
        vec![f.entry_probe_offset]
    };

    let returns = if !wants.ret {
        Returns::None
    } else if exact && loc.file_offset != f.entry_offset {
        return Err(Error::BadSpec {
            spec: spec.text.clone(),
            why: format!(
                "a return probe needs a function's entry, and {} is {:#x} bytes into {}: name the function or give its entry offset {}",
                loc.file_offset,
                f.delta(loc.file_offset),
                f.name,
                f.entry_offset
            ),
        });
    } else if force_uretprobe {
        summary.forced_uretprobes.push(name.clone());
        Returns::UretProbe
    } else if f.rets.is_empty() {
        notes.push(format!(
            "warning: Go function {} has no RET instruction (it never returns, or only through a tail jump): no return probe placed",
            f.name
        ));
        Returns::None
    } else {
        if !f.tail_jumps.is_empty() {
            notes.push(format!(
                "warning: Go function {} also leaves through {} tail jump(s) (at {}): calls that return that way pass none of its RETs, so their returns are not seen",
                f.name,
                f.tail_jumps.len(),
                f.tail_jumps
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        summary.ret_probed.push(name.clone());
        Returns::Instructions(f.rets.iter().map(|&(_, off)| off).collect())
    };
    if entry_offsets.is_empty() && returns == Returns::None {
        return Ok(None);
    }
    if wants.ret && wants.entry && img.abi == GoAbi::Stack {
        summary
            .thread_paired
            .push((name.clone(), img.version_label()));
    }
    Ok(Some(FunctionPlan {
        name: name.clone(),
        image: loc.image.clone(),
        probe_path: loc.probe_path.clone(),
        function_offset: f.entry_offset,
        entry_offsets,
        returns,
        convention,
        args: if wants.args {
            spec.args.clone()
        } else {
            vec![]
        },
        ret: spec.ret,
        pairing,
        symbol: loc.symbol.as_ref().map(|s| s.name.clone()),
    }))
}

impl GoSummary {
    /// The lines that explain, once per command, what was done for Go functions.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.ret_probed.is_empty() {
            out.push(format!(
                "Go: returns of {} are probed on each RET instruction instead of with a uretprobe, which crashes Go programs when a goroutine stack moves during the call (--force-uretprobe overrides)",
                list(&self.ret_probed)
            ));
        }
        if !self.forced_uretprobes.is_empty() {
            out.push(format!(
                "WARNING: --force-uretprobe on Go function(s) {}: if a goroutine stack grows or is copied while one of them runs, the Go runtime finds the kernel's return trampoline on the stack and KILLS THE PROGRAM (\"unexpected return pc\", \"fatal error: unknown caller pc\")",
                list(&self.forced_uretprobes)
            ));
        }
        if !self.thread_paired.is_empty() {
            out.push(format!(
                "Go: {} built by {} use(s) the stack ABI, whose goroutine pointer lives in thread-local storage that probes cannot read: calls are paired by thread, so a call whose goroutine moves to another thread is mis-timed or left unpaired",
                list(
                    &self
                        .thread_paired
                        .iter()
                        .map(|(n, _)| n.clone())
                        .collect::<Vec<_>>()
                ),
                self.thread_paired[0].1
            ));
        }
        out
    }
}

/// `a, b, c` or `a, b and 12 more function(s)`.
fn list(names: &[String]) -> String {
    const SHOWN: usize = 3;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{} and {} more function(s)",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ArgRequest;
    use crate::spec::ProbeSpec;
    use netprobe_core::symbol::{Symbol, SymbolOrigin};

    /// `main.BigFrame` of the Go 1.19 sample app: stack check up to +0x12, one RET at +0x71.
    fn big_frame() -> GoFunctionFacts {
        GoFunctionFacts {
            name: "main.BigFrame".into(),
            entry: VirtAddr(0x613c80),
            entry_offset: FileOffset(0x213c80),
            entry_probe: VirtAddr(0x613c92),
            entry_probe_offset: FileOffset(0x213c92),
            has_stack_check: true,
            rets: vec![(VirtAddr(0x613cf1), FileOffset(0x213cf1))],
            tail_jumps: vec![],
            args_size: Some(8),
            sp_moves_before_entry_probe: false,
        }
    }

    fn image(abi: GoAbi, f: &GoFunctionFacts) -> GoImage {
        GoImage {
            path: "/bin/app".into(),
            version: GoVersion::parse(if abi == GoAbi::Register {
                "go1.19.8"
            } else {
                "go1.16.15"
            }),
            version_lower_bound: GoVersion::new(1, 16, 0),
            abi,
            arch: Arch::X86_64,
            functions: [(f.entry_offset.0, f.clone())].into_iter().collect(),
        }
    }

    fn location(f: &GoFunctionFacts, at: FileOffset, named: bool) -> Location {
        Location {
            name: f.name.clone(),
            image: "/bin/app".into(),
            probe_path: "/bin/app".into(),
            file_offset: at,
            symbol: named.then(|| Symbol {
                name: f.name.clone(),
                kind: SymbolKind::GoFunction,
                origin: SymbolOrigin::GoPclntab,
                address: Address::Virt(f.entry),
                size: Some(0x86),
                file_offset: Some(f.entry_offset),
            }),
        }
    }

    const LATENCY: Wants = Wants {
        entry: true,
        ret: true,
        args: false,
        pair: true,
    };

    fn run(
        img: &GoImage,
        f: &GoFunctionFacts,
        spec: &str,
        loc: &Location,
        wants: Wants,
        force: bool,
    ) -> (Result<Option<FunctionPlan>>, Vec<String>) {
        let mut notes = Vec::new();
        let mut summary = GoSummary::default();
        let spec = ProbeSpec::parse(spec).unwrap();
        let r = plan_function(img, f, &spec, loc, wants, force, &mut notes, &mut summary);
        notes.extend(summary.notes());
        (r, notes)
    }

    #[test]
    fn by_name_entry_after_prologue_and_every_ret() {
        let f = big_frame();
        let img = image(GoAbi::Register, &f);
        let loc = location(&f, f.entry_offset, true);
        let (plan, notes) = run(&img, &f, "/bin/app:main.BigFrame", &loc, LATENCY, false);
        let plan = plan.unwrap().unwrap();
        assert_eq!(plan.entry_offsets, vec![FileOffset(0x213c92)]);
        assert_eq!(plan.function_offset, FileOffset(0x213c80));
        assert_eq!(
            plan.returns,
            Returns::Instructions(vec![FileOffset(0x213cf1)])
        );
        assert_eq!(
            plan.convention,
            CallingConvention::GoRegAbi { arch: Arch::X86_64 }
        );
        assert_eq!(
            plan.pairing,
            PairingKey::Register(netprobe_core::abi::Register::R14)
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("on each RET instruction"), "{notes:?}");
    }

    #[test]
    fn force_uretprobe_warns_loudly() {
        let f = big_frame();
        let img = image(GoAbi::Register, &f);
        let loc = location(&f, f.entry_offset, true);
        let (plan, notes) = run(&img, &f, "/bin/app:main.BigFrame", &loc, LATENCY, true);
        assert_eq!(plan.unwrap().unwrap().returns, Returns::UretProbe);
        assert!(notes
            .iter()
            .any(|n| n.starts_with("WARNING: --force-uretprobe")
                && n.contains("unexpected return pc")));
    }

    #[test]
    fn tail_jumps_and_missing_rets_are_reported() {
        let mut f = big_frame();
        f.tail_jumps = vec![VirtAddr(0x613cd0)];
        let img = image(GoAbi::Register, &f);
        let loc = location(&f, f.entry_offset, true);
        let (plan, notes) = run(&img, &f, "r:/bin/app:main.BigFrame", &loc, LATENCY, false);
        assert!(plan.unwrap().is_some());
        assert!(notes
            .iter()
            .any(|n| n.contains("1 tail jump(s) (at 0x613cd0)")));

        f.rets.clear();
        let img = image(GoAbi::Register, &f);
        let return_only = Wants {
            entry: false,
            ret: true,
            args: false,
            pair: false,
        };
        let (plan, notes) = run(
            &img,
            &f,
            "r:/bin/app:main.BigFrame",
            &loc,
            return_only,
            false,
        );
        assert!(plan.unwrap().is_none());
        assert!(notes.iter().any(|n| n.contains("has no RET instruction")));
    }

    #[test]
    fn an_offset_is_probed_exactly_where_given() {
        let f = big_frame();
        let img = image(GoAbi::Register, &f);
        let count = Wants {
            entry: true,
            ret: false,
            args: false,
            pair: false,
        };
        // The first byte: probed there, with the double-fire warning.
        let loc = location(&f, f.entry_offset, false);
        let (plan, notes) = run(&img, &f, "/bin/app:0x213c80", &loc, count, false);
        assert_eq!(plan.unwrap().unwrap().entry_offsets, vec![f.entry_offset]);
        assert!(notes[0].contains("fires twice"), "{notes:?}");
        // Inside the function: no return probe can belong to it.
        let inside = location(&f, FileOffset(0x213ca9), false);
        let (plan, _) = run(&img, &f, "/bin/app:0x213ca9", &inside, LATENCY, false);
        assert!(plan.is_err());
        let (plan, notes) = run(&img, &f, "/bin/app:0x213ca9", &inside, count, false);
        assert_eq!(
            plan.unwrap().unwrap().entry_offsets,
            vec![FileOffset(0x213ca9)]
        );
        assert!(notes[0].contains("0x29 bytes into Go function main.BigFrame"));
    }

    #[test]
    fn stack_abi_pairs_by_thread_and_keeps_sp() {
        let f = big_frame();
        let img = image(GoAbi::Stack, &f);
        let loc = location(&f, f.entry_offset, true);
        let (plan, notes) = run(&img, &f, "/bin/app:main.BigFrame", &loc, LATENCY, false);
        let plan = plan.unwrap().unwrap();
        assert_eq!(
            plan.convention,
            CallingConvention::GoStackAbi {
                arch: Arch::X86_64,
                args_size: Some(8)
            }
        );
        assert_eq!(plan.pairing, PairingKey::Thread);
        assert_eq!(plan.entry_offsets, vec![f.entry_probe_offset]);
        assert!(notes
            .iter()
            .any(|n| n.contains("paired by thread") && n.contains("go1.16.15")));

        // Were SP to move before the probe point, stack arguments are read at the first byte.
        let mut moved = big_frame();
        moved.sp_moves_before_entry_probe = true;
        let img = image(GoAbi::Stack, &moved);
        let trace = Wants {
            entry: true,
            ret: false,
            args: true,
            pair: false,
        };
        let (plan, notes) = run(
            &img,
            &moved,
            "/bin/app:main.BigFrame s64",
            &loc,
            trace,
            false,
        );
        let plan = plan.unwrap().unwrap();
        assert_eq!(plan.entry_offsets, vec![moved.entry_offset]);
        assert_eq!(
            plan.args,
            vec![ArgRequest::Positional {
                name: None,
                ty: netprobe_core::abi::ValueType::Int(netprobe_core::abi::IntType::S64)
            }]
        );
        assert!(notes[0].contains("read at the first byte"));
    }
}
