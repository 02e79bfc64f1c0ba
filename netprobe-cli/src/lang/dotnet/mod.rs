//! .NET managed methods in live commands: how a ReadyToRun method becomes probes, and
//! what to tell the user about the runtime before and while tracing.
//!
//! - [`Planner`]: the probes of one managed method. Entry arguments come from its signature
//!   ([`args`]); returns are observed by plain uprobes on each RET instruction of the method's main
//!   body, reading rax. Not by uretprobes: a uretprobe replaces the return address on the stack,
//!   and when the garbage collector walks a thread's stack during such a call it meets that
//!   foreign address and the process dies with SIGSEGV (verified on .NET 8.0.4 and 3.1.23:
//!   `Thread.Sleep` under a uretprobe with a thread calling `GC.Collect()` crashes on the first
//!   collection; entry uprobes and RET uprobes run 300 of 300 calls clean).
//! - [`preflight`]: the tiering guard ([`runtime`]): which runtime, which settings, and the
//!   warning with the exact variable before tracing.
//! - `crate::sinks::stall`: the "hits stopped" message during `trace`/`count` (a sink decorator).
//! - [`resolve`]: `-c` commands running a .NET app, and the JIT explanation for methods without
//!   precompiled code.

pub mod resolve;
pub mod runtime;

use crate::error::{Error, Result};
use crate::lang::Wants;
use crate::plan::{ArgRequest, FunctionId, FunctionPlan, PairingKey, ProbePlan, Returns, Role};
use crate::spec::{Location, ProbeSpec, Targeting};
use netprobe_core::abi::dotnet::{args, exits, shape_of, ALWAYS_INLINE_IL_BYTES};
use netprobe_core::abi::CallingConvention;
use netprobe_core::addr::{FileOffset, Rva};
use netprobe_core::dotnet::{Assembly, EntryKind, R2rMethod};
use netprobe_core::symbol::{Address, Symbol};
use resolve::DotnetCommand;
use runtime::Subject;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// An assembly opened for planning, with its precompiled methods once a lookup needs them all.
struct Loaded {
    asm: Assembly,
    methods: std::cell::OnceCell<Vec<R2rMethod>>,
}

impl Loaded {
    /// The precompiled method `sym` names at `rva`: among the methods of `sym`'s own name
    /// (decoded alone, [`Assembly::methods_named`]) when one has its name and RVA, else as
    /// before from the whole listing (the one of its name and RVA, else the first at its RVA).
    fn method(&self, sym: &Symbol, rva: Rva) -> Result<Option<R2rMethod>> {
        let own = managed_own_name(&sym.name);
        if let Some(own) = own {
            let named = self.asm.methods_named(own)?;
            if let Some(m) = named
                .into_iter()
                .find(|m| m.rva == rva && m.name == sym.name)
            {
                return Ok(Some(m));
            }
        }
        let methods = match self.methods.get() {
            Some(m) => m,
            None => {
                let all = self.asm.methods()?;
                self.methods.get_or_init(|| all)
            }
        };
        Ok(methods
            .iter()
            .find(|m| m.rva == rva && m.name == sym.name)
            .or_else(|| methods.iter().find(|m| m.rva == rva))
            .cloned())
    }
}

/// A managed method's own name in its listed name `[instance ]RET [Assembly] Owner::NAME(ARGS)`:
/// between the first `::` and the `(` after it; `None` without them.
fn managed_own_name(name: &str) -> Option<&str> {
    let (_, after) = name.split_once("::")?;
    let (own, _) = after.split_once('(')?;
    Some(own)
}

/// The assemblies of one command's managed locations, each opened once, and how their methods
/// are probed (asked by [`crate::lang::Planner`] for each ReadyToRun location).
#[derive(Default)]
pub struct Assemblies {
    loaded: HashMap<PathBuf, Rc<Loaded>>,
    /// The last planned function returns no value netprobe can read: its return probes fetch
    /// nothing (see [`Assemblies::added`]).
    strip_ret: bool,
}

/// The assembly a managed location's method comes from: the probed file itself, or for a
/// method of an assembly inside a .NET single-file bundle, its member path
/// (`BUNDLE/System.Private.CoreLib.dll`, which `Assembly::open` opens in place).
pub fn assembly_path(loc: &Location) -> &Path {
    if netprobe_core::dotnet::bundle::is_member_of(&loc.image, &loc.probe_path) {
        &loc.image
    } else {
        &loc.probe_path
    }
}

/// Whether a planned function is managed ReadyToRun code: its probed file is a PE image, or it
/// is a method of an assembly inside a .NET single-file bundle (`image` is then the member path
/// of `probe_path`, see [`assembly_path`]).
pub fn is_managed_function(image: &Path, probe_path: &Path) -> bool {
    is_managed_image(probe_path) || netprobe_core::dotnet::bundle::is_member_of(image, probe_path)
}

/// Whether the file at `path` is a PE image (`MZ`): a probed function there is managed
/// ReadyToRun code. Unreadable files are not.
pub fn is_managed_image(path: &Path) -> bool {
    use netprobe_core::image::{sniff_file, ImageFormat};
    matches!(sniff_file(path), Ok(Some(ImageFormat::Pe)))
}

impl Assemblies {
    fn load(&mut self, path: &Path) -> Result<Rc<Loaded>> {
        if let Some(l) = self.loaded.get(path) {
            return Ok(l.clone());
        }
        let asm = Assembly::open(path)?;
        if asm.r2r().is_none() {
            // IL-only: the error `methods` gives (how to publish ReadyToRun).
            asm.methods()?;
        }
        let l = Rc::new(Loaded {
            asm,
            methods: std::cell::OnceCell::new(),
        });
        self.loaded.insert(path.to_path_buf(), l.clone());
        Ok(l)
    }

    /// The probes of managed method `loc` for `spec`; what the user should know goes to `notes`
    /// (one line each, starting with the method's name):
    /// - entry (trace, count, latency, `p:`): an entry uprobe at the method's first instruction;
    ///   when arguments are wanted and the spec gives none, `this` and the parameters its
    ///   signature puts in integer registers (strings decoded, see [`args::entry_layout`]);
    /// - return (`r:`, latency): a uprobe on every RET of the main body, the value typed from the
    ///   signature unless the spec gives a type (nothing for `void`: call [`Assemblies::added`]).
    ///
    /// Errors: the assembly cannot be read, the method is not in its ReadyToRun listing, or (for
    /// returns) its main body has no RET.
    pub fn plan_function(
        &mut self,
        spec: &ProbeSpec,
        loc: &Location,
        wants: Wants,
        notes: &mut Vec<String>,
    ) -> Result<FunctionPlan> {
        let mut note = |n: String| {
            if !notes.contains(&n) {
                notes.push(n);
            }
        };
        self.strip_ret = false;
        let loaded = self.load(assembly_path(loc))?;
        let asm = &loaded.asm;
        let sym = loc.symbol.as_ref().ok_or_else(|| bad(spec, "no symbol"))?;
        let Address::Rva(rva) = sym.address else {
            return Err(bad(spec, "a managed method without an RVA"));
        };
        let m = &loaded.method(sym, rva)?.ok_or_else(|| {
            bad(
                spec,
                format!(
                    "{} is not in the ReadyToRun listing of {}",
                    sym.name,
                    loc.image.display()
                ),
            )
        })?;
        // Offsets in the assembly (to read its code) and in the probed file (a single-file
        // bundle stores the assembly at `file_base`; a loose assembly file has base 0).
        let base = asm.file_base().0;
        let start = m
            .file_offset
            .unwrap_or(FileOffset(loc.file_offset.0.saturating_sub(base)));
        let probe_start = FileOffset(start.0 + base);
        let shape_storage = shape_of(asm, m)?;
        let shape = shape_storage.shape();
        if let Some(il) = (m.entry == EntryKind::MethodDef)
            .then(|| asm.il_code_size(m.token))
            .flatten()
        {
            if il <= ALWAYS_INLINE_IL_BYTES {
                note(format!(
                    "{}: only {il} bytes of IL, so the JIT usually inlines it into JIT-compiled callers, and inlined calls never reach the probe (calls through delegates, reflection or other precompiled code still do)",
                    shape.display
                ));
            }
        }
        let mut ret = spec.ret;
        let returns = if wants.ret {
            let code = asm
                .bytes()
                .get(start.0 as usize..(start.0 + m.size) as usize)
                .ok_or_else(|| bad(spec, "the method's code lies outside its file"))?;
            let exits = exits(code, m.rva.0);
            if exits.rets.is_empty() {
                return Err(bad(
                    spec,
                    format!(
                        "{} never returns through a RET of its own (it ends in {} tail call(s) or throws), so its returns cannot be observed; probe its entry instead",
                        shape.display, exits.tail_calls
                    ),
                ));
            }
            if exits.tail_calls > 0 {
                note(format!(
                    "{}: {} of its exits are tail calls into other methods; returns through them are not seen",
                    shape.display, exits.tail_calls
                ));
            }
            if ret.is_none() {
                match args::return_type(&shape) {
                    Ok(Some(t)) => ret = Some(t),
                    Ok(None) => self.strip_ret = true,
                    Err(n) => {
                        note(n);
                        self.strip_ret = true;
                    }
                }
            }
            Returns::Instructions(
                exits
                    .rets
                    .iter()
                    .map(|r| FileOffset(probe_start.0 + (r - m.rva.0)))
                    .collect(),
            )
        } else {
            Returns::None
        };
        let arg_requests = if !wants.args {
            vec![]
        } else if !spec.args.is_empty() {
            spec.args.clone()
        } else if wants.entry {
            let layout = args::entry_layout(&shape);
            for n in layout.notes {
                note(n);
            }
            layout
                .args
                .into_iter()
                .map(|a| ArgRequest::Positional {
                    name: Some(a.name),
                    ty: a.ty,
                })
                .collect()
        } else {
            vec![]
        };
        Ok(FunctionPlan {
            // `System.Threading.Thread::Sleep(int32)`: the full name (return type, assembly)
            // stays the symbol's.
            name: shape.display.clone(),
            image: loc.image.clone(),
            probe_path: loc.probe_path.clone(),
            function_offset: probe_start,
            entry_offsets: if wants.entry {
                vec![probe_start]
            } else {
                vec![]
            },
            returns,
            convention: CallingConvention::native(shape.arch),
            args: arg_requests,
            ret,
            pairing: PairingKey::Thread,
            // Event names come from the symbol when there is one; the short name makes readable
            // ones (`System_String__Replace_string_string__e0`), and perf/bpftrace cannot use
            // managed names anyway.
            symbol: None,
        })
    }

    /// After `plan.add_function` added the function [`Assemblies::plan_function`] planned last (as
    /// `id`): when its return has no value netprobe can read (`void`, a float in XMM0, a struct),
    /// its return probes fetch nothing, so returns print without a value.
    pub fn added(&mut self, plan: &mut ProbePlan, id: FunctionId) {
        if std::mem::take(&mut self.strip_ret) {
            for p in plan
                .probes
                .iter_mut()
                .filter(|p| p.function == id && p.role == Role::Return)
            {
                p.fetches.retain(|a| a.field != "ret");
                p.args.clear();
            }
        }
    }
}

fn bad(spec: &ProbeSpec, why: impl Into<String>) -> Error {
    Error::BadSpec {
        spec: spec.text.clone(),
        why: why.into(),
    }
}

/// What the tiering guard found before tracing.
#[derive(Debug, Default)]
pub struct Guard {
    /// Warnings and notes, one line each, to print before tracing.
    pub messages: Vec<String>,
    /// Per target pid whose runtime replaces ReadyToRun code: what to do about it.
    pub fix: HashMap<u32, String>,
    /// The same for a `-c` command or an unknown (system-wide) target.
    pub default_fix: Option<String>,
    /// Variables to set for the `-c` command (`--keep-r2r`).
    pub child_env: Vec<(String, String)>,
}

/// Reads the runtime and settings of each .NET target and says whether probes on ReadyToRun code
/// will keep firing (see [`runtime::guard_messages`]). Only when `has_managed` (the plan probes
/// managed methods); `keep_r2r` (`-c` only) adds the variables that keep R2R code.
pub fn preflight(
    has_managed: bool,
    targeting: &Targeting,
    command: Option<&DotnetCommand>,
    keep_r2r: bool,
) -> Result<Guard> {
    let mut g = Guard::default();
    if keep_r2r {
        if !matches!(targeting, Targeting::Command { .. }) {
            return Err(Error::usage(
                "--keep-r2r works with -c only (it sets DOTNET_TieredCompilation=0 and COMPlus_TieredCompilation=0 for the command); a running process keeps its settings: restart it with that variable",
            ));
        }
        g.child_env = runtime::keep_r2r_env();
    }
    if !has_managed {
        return Ok(g);
    }
    match targeting {
        Targeting::Pids(pids) => {
            for &pid in pids {
                let Some((version, k)) = runtime::knobs_of_process(pid) else {
                    continue;
                };
                g.messages
                    .extend(runtime::guard_messages(&Subject::Pid(pid), &version, &k));
                if k.replaces_r2r() {
                    g.fix.insert(
                        pid,
                        format!(
                            "restart it with {}=0 to keep every hit",
                            version.recommended("TieredCompilation")
                        ),
                    );
                }
            }
        }
        Targeting::Command { .. } => {
            let Some(version) = command.and_then(|c| c.version.clone()) else {
                if !keep_r2r {
                    g.messages.push(
                        "note: netprobe could not tell which .NET runtime the command runs: with tiered compilation on (the default), probes on ReadyToRun code stop firing after a method's first 30 calls; add --keep-r2r to keep every hit".into(),
                    );
                    g.default_fix = Some("run it again with --keep-r2r to keep every hit".into());
                }
                return Ok(g);
            };
            let mut env: Vec<(String, String)> = std::env::vars_os()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            env.extend(g.child_env.iter().cloned());
            let (cfg_path, cfg) = match command.and_then(|c| c.bundled_config.clone()) {
                Some((p, json)) => (Some(p), Some(json)),
                None => {
                    let p = command.and_then(|c| c.runtimeconfig.clone());
                    let cfg = p.as_deref().and_then(runtime::read_runtimeconfig);
                    (p, cfg)
                }
            };
            let k = runtime::knobs(&env, &version, cfg_path.as_deref().zip(cfg.as_ref()));
            if keep_r2r {
                g.messages.push(format!(
                    "note: --keep-r2r: the command runs with {} so ReadyToRun code is never replaced",
                    g.child_env
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
            }
            g.messages
                .extend(runtime::guard_messages(&Subject::Command, &version, &k));
            if k.replaces_r2r() {
                g.default_fix = Some("run it again with --keep-r2r to keep every hit".into());
            }
        }
        Targeting::SystemWide => {
            g.messages.push(
                "note: without -p or -c netprobe cannot read the .NET runtime's settings: with tiered compilation on (the default), probes on ReadyToRun code stop firing after a method's first 30 calls; start the program with DOTNET_TieredCompilation=0 (COMPlus_TieredCompilation=0 on .NET Core 3.x) to keep every hit".into(),
            );
            g.default_fix = Some(
                "start the program with DOTNET_TieredCompilation=0 (COMPlus_ on .NET Core 3.x) to keep every hit".into(),
            );
        }
    }
    Ok(g)
}

/// Prints the guard's messages on stderr.
pub fn print_guard(g: &Guard) {
    for m in &g.messages {
        crate::printable::eprint_line(&format!("netprobe: {m}"));
    }
}

/// The `-c` command as a .NET app, when it is one.
pub fn command_of(argv: Option<&[String]>, targeting: &Targeting) -> Option<DotnetCommand> {
    let (Some(argv), Targeting::Command { exe }) = (argv, targeting) else {
        return None;
    };
    DotnetCommand::detect(argv, exe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_r2r_needs_a_command() {
        let e = preflight(true, &Targeting::Pids(vec![1]), None, true).unwrap_err();
        assert!(e.to_string().contains("works with -c only"), "{e}");
        let g = preflight(
            false,
            &Targeting::Command {
                exe: "/bin/true".into(),
            },
            None,
            true,
        )
        .unwrap();
        assert_eq!(g.child_env, runtime::keep_r2r_env());
    }
}
