//! Probe plans: the backend-neutral model between "which functions, which arguments" and the
//! probes that observe them.
//!
//! A *traced function* may need several probes: a C function has one entry probe and one return
//! probe (a uretprobe); a Go function has an entry probe after its stack-check prologue and one
//! plain probe per RET instruction (a uretprobe crashes Go programs whose stack grows, see
//! `crate::lang::go`); a .NET method has an entry probe whose values decode `this` and string
//! fields. Each [`KernelProbe`] says which function it belongs to and in which [`Role`], which
//! values it reads ([`Fetch`], at an [`ArgLocation`]), and how they decode into named values, so
//! every recorded hit decodes back to "function F, entry/return, these argument values".
//!
//! Build plans with [`ProbePlan::add_function`] from a [`FunctionPlan`]; a backend
//! (`crate::backend`) places the probes in its own terms and decodes their hits into [`Hit`]s.

mod filter;
mod hit;

pub use filter::apply_filter;
pub use hit::{Hit, StackCopy, UserStack, Value};

use crate::error::{Error, Result};
use netprobe_core::abi::{
    ArgLocation, CallingConvention, IntType, Register, ValueType, STRING_PREFIX,
};
use netprobe_core::addr::FileOffset;
use netprobe_core::arch::Arch;
use serde::Serialize;
use std::path::PathBuf;

/// Index of a traced function in its plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct FunctionId(pub u32);

/// Whether a spec or a probe observes a function's entry or its return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Entry,
    Return,
}

/// How a probe is placed: a plain uprobe on an instruction, or a uretprobe (entry breakpoint that
/// hijacks the return address and fires on return, where the stack pointer is 8 bytes above the
/// entry's on x86-64 and where it was on aarch64, `ArchConventions::sp_after_return`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    Entry,
    UretProbe,
}

/// An argument the user asked for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgRequest {
    /// The next argument(s) by position in the calling convention, with a type and an optional name
    /// (default `arg0`, `arg1`, ... by position).
    Positional { name: Option<String>, ty: ValueType },
    /// Backend-specific text saying where and how to read a value (tracefs: a typed fetch-arg,
    /// `+8(%si):s32`); only the backend that speaks it accepts it.
    Raw { name: String, text: String },
    /// A value whose words the debug info locates at the probe point (`crate::lang::dwarf_args`):
    /// one location per word the type takes, in order; no position is taken.
    Located {
        name: String,
        ty: ValueType,
        words: Vec<ArgLocation>,
    },
}

impl ArgRequest {
    /// How many argument words of the calling convention it takes by position.
    pub fn positional_words(&self) -> usize {
        match self {
            ArgRequest::Positional { ty, .. } => ty.words(),
            ArgRequest::Raw { .. } | ArgRequest::Located { .. } => 0,
        }
    }
}

/// How a function's return is observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returns {
    /// Not at all.
    None,
    /// A uretprobe at the function's entry offset (C, .NET).
    UretProbe,
    /// Plain uprobes at each RET instruction (Go), reading the result register.
    Instructions(Vec<FileOffset>),
}

/// What makes an entry and a return "the same call", for latency.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairingKey {
    /// The thread id (C, .NET: a call starts and ends on one thread).
    Thread,
    /// A register fetched at entry and return, e.g. `r14` (the goroutine pointer in Go's register
    /// ABI: goroutines migrate between threads, so the tid would mis-pair).
    Register(Register),
}

/// Everything needed to trace one function. The lead builds this from a resolved target plus the
/// language's rules (prologue skip, RET offsets, calling convention).
#[derive(Clone, Debug)]
pub struct FunctionPlan {
    /// Display name (the symbol name).
    pub name: String,
    /// The image as the target sees it (for messages).
    pub image: PathBuf,
    /// The path written into `uprobe_events` (e.g. through `/proc/PID/root`).
    pub probe_path: PathBuf,
    /// File offset of the function's first instruction (what a uretprobe needs).
    pub function_offset: FileOffset,
    /// Where entry probes go: usually `[function_offset]`; Go: after the stack-check prologue;
    /// empty for a return-only probe.
    pub entry_offsets: Vec<FileOffset>,
    pub returns: Returns,
    pub convention: CallingConvention,
    pub args: Vec<ArgRequest>,
    /// Type of the return value (for return probes); `None` = `x64`.
    pub ret: Option<ValueType>,
    pub pairing: PairingKey,
    /// The symbol the function came from, when known (dry-run uses its name for perf/bpftrace).
    pub symbol: Option<String>,
}

/// A function in a plan, with its decoded argument layout.
#[derive(Clone, Debug, Serialize)]
pub struct TracedFunction {
    pub id: FunctionId,
    pub name: String,
    pub image: PathBuf,
    pub probe_path: PathBuf,
    pub function_offset: FileOffset,
    pub convention: CallingConvention,
    pub pairing: PairingKey,
    pub symbol: Option<String>,
    /// Argument names and types, as users asked for them (for headers, dry-run).
    #[serde(skip)]
    pub arg_requests: Vec<ArgRequest>,
    #[serde(skip)]
    pub ret: Option<ValueType>,
}

/// One value a probe reads when it fires, stored in the hit's field `field`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    pub field: String,
    pub value: FetchValue,
}

/// What a [`Fetch`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchValue {
    /// An integer at a location.
    Int { at: ArgLocation, ty: IntType },
    /// A NUL-terminated string in memory at `at`.
    CString { at: ArgLocation },
    /// `len` elements of `elem` (`u8`, `u16`) in memory from `at`.
    Array {
        at: ArgLocation,
        elem: IntType,
        len: u8,
    },
    /// The name of the task that hit the probe.
    Comm,
    /// A user's backend-specific text ([`ArgRequest::Raw`]).
    Backend { text: String },
}

impl Fetch {
    fn new(field: impl Into<String>, value: FetchValue) -> Fetch {
        Fetch {
            field: field.into(),
            value,
        }
    }
}

/// One logical value decoded from one or more fields of a hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decode {
    /// An integer field.
    Int { field: String, ty: IntType },
    /// A `string` field.
    CString { field: String },
    /// Length field (s32) + `u16[N]` chars field.
    Utf16 {
        len_field: String,
        chars_field: String,
    },
    /// `u8[N]` bytes field + length field.
    GoString {
        bytes_field: String,
        len_field: String,
    },
    /// A user's backend-specific value ([`FetchValue::Backend`]): the backend that read it
    /// decodes it by its own type.
    Raw { field: String },
}

/// A named value of a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogicalArg {
    pub name: String,
    pub decode: Decode,
}

/// One kernel probe of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelProbe {
    pub path: PathBuf,
    pub offset: FileOffset,
    pub kind: ProbeKind,
    /// The architecture of the probed image (its function's calling convention's): which
    /// registers the fetches name, and where the stack pointer is after a return.
    pub arch: Arch,
    /// What the probe reads, in order.
    pub fetches: Vec<Fetch>,
    pub function: FunctionId,
    pub role: Role,
    /// How to turn this probe's fields back into named values.
    pub args: Vec<LogicalArg>,
    /// Field holding the pairing key, when pairing by register.
    pub pair_field: Option<String>,
    /// Field holding `$comm`, when recorded.
    pub comm_field: Option<String>,
    /// Field holding the word at the stack pointer when it is the return address (see
    /// [`ProbePlan::record_user_stacks`]).
    pub return_address_field: Option<String>,
    /// Only hits that pass this are recorded (`--filter`, `--tid`, `--comm`; see
    /// [`apply_filter`]); the backend evaluates it where hits are made.
    pub filter: Option<crate::filter::ProbeFilter>,
    /// An entry probe's probe-point decision (`crate::gate::choose_entry_points`): where it was
    /// planned, where it goes, and why it stayed. `None` for probes never considered (returns,
    /// raw offsets, .NET, `--exact-entry`).
    pub entry_choice: Option<netprobe_core::probe_point::EntryChoice>,
}

/// Functions and the kernel probes that observe them.
#[derive(Clone, Debug, Default)]
pub struct ProbePlan {
    pub functions: Vec<TracedFunction>,
    pub probes: Vec<KernelProbe>,
    /// Record the task's command name with every hit.
    pub record_comm: bool,
    /// What the user should know about how the functions are probed (why RET probes instead of
    /// uretprobes, where an entry probe sits, warnings): one line each, printed on stderr by the
    /// live commands and as comments by `--dry-run`. Language modules (`crate::lang`) add them.
    pub notes: Vec<String>,
    /// Functions the user gave as a raw `IMAGE:0xOFFSET`, with that offset: the probe-safety
    /// gate (`crate::gate`) checks a probe there against whatever function encloses it, and
    /// `--unsafe-offset` may override its refusal.
    pub user_offsets: Vec<(FunctionId, FileOffset)>,
    /// Functions that are .NET managed methods (the planner knows each image's kind): only
    /// these concern the .NET tiering guard and the "hits stopped" watcher.
    pub managed: Vec<FunctionId>,
    /// Record the user call stack under every hit ([`Hit::user_stack`]).
    pub user_stacks: bool,
}

const COMM_FIELD: &str = "np_comm";
pub(crate) const RETURN_ADDRESS_FIELD: &str = "np_ra";
const PAIR_FIELD: &str = "np_pair";

impl ProbePlan {
    pub fn new(record_comm: bool) -> ProbePlan {
        ProbePlan {
            record_comm,
            ..ProbePlan::default()
        }
    }

    /// Adds a function and its probes. Errors: more positional arguments than the convention has
    /// registers, duplicate names, or a function with neither entry nor return probes.
    pub fn add_function(&mut self, f: FunctionPlan) -> Result<FunctionId> {
        let id = FunctionId(self.functions.len() as u32);
        let bad = |why: String| Error::BadSpec {
            spec: f.name.clone(),
            why,
        };
        if f.entry_offsets.is_empty() && f.returns == Returns::None {
            return Err(bad("nothing to probe: no entry and no return".into()));
        }
        // Entry values. Register conventions pass an argument that no longer fits in the
        // remaining registers on the stack, whole, and later arguments still take registers that
        // are left (System V AMD64 ABI 3.2.3 "Parameter Passing"; Go `abi-internal.md`, "Function
        // call argument and result passing": a failed register assignment is reset and the value
        // is stack-assigned). Stack words are read relative to the stack pointer a call enters
        // with, so only where the probe sees it: at the function's first byte, or (Go) after a
        // stack-check prologue that `lang::go` checked does not move it.
        let arch = f.convention.arch();
        let sp_is_entry_sp =
            f.convention.is_go() || f.entry_offsets.iter().all(|o| *o == f.function_offset);
        let mut next_word = 0usize;
        let mut next_stack_slot = 0usize;
        let mut entry_args = Vec::new();
        let mut entry_fetch = Vec::new();
        for (pos, req) in f.args.iter().enumerate() {
            match req {
                ArgRequest::Positional { name, ty } => {
                    let name = name.clone().unwrap_or_else(|| format!("arg{pos}"));
                    let need = ty.words();
                    let regs = f.convention.int_registers().len();
                    let in_registers = matches!(f.convention, CallingConvention::GoStackAbi { .. })
                        || next_word + need <= regs;
                    let words: Option<Vec<ArgLocation>> = if in_registers {
                        (next_word..next_word + need)
                            .map(|w| f.convention.arg_word(w))
                            .collect()
                    } else if sp_is_entry_sp {
                        let w = (next_stack_slot..next_stack_slot + need)
                            .map(|slot| f.convention.stack_slot(slot))
                            .collect();
                        next_stack_slot += need;
                        w
                    } else {
                        None
                    };
                    let Some(words) = words else {
                        return Err(bad(format!(
                            "argument {name} is passed on the stack (the {} convention has {} integer argument registers), and the probe is not at the function's first byte, where the stack offset is known; probe the function by name or at its entry, or use a raw fetch-arg (NAME=EXPR:TYPE)",
                            f.convention.label(),
                            regs
                        )));
                    };
                    if !in_registers {
                        let (decode, fetch) = typed_fetch(&name, *ty, &words);
                        entry_args.push(LogicalArg { name, decode });
                        entry_fetch.extend(fetch);
                        continue;
                    }
                    next_word += need;
                    let (decode, fetch) = typed_fetch(&name, *ty, &words);
                    entry_args.push(LogicalArg { name, decode });
                    entry_fetch.extend(fetch);
                }
                ArgRequest::Located { name, ty, words } => {
                    let (decode, fetch) = typed_fetch(name, *ty, words);
                    entry_args.push(LogicalArg {
                        name: name.clone(),
                        decode,
                    });
                    entry_fetch.extend(fetch);
                }
                ArgRequest::Raw { name, text } => {
                    entry_args.push(LogicalArg {
                        name: name.clone(),
                        decode: Decode::Raw {
                            field: name.clone(),
                        },
                    });
                    entry_fetch.push(Fetch::new(
                        name.clone(),
                        FetchValue::Backend { text: text.clone() },
                    ));
                }
            }
        }
        for (i, a) in entry_args.iter().enumerate() {
            if entry_args[..i].iter().any(|b| b.name == a.name) {
                return Err(bad(format!("argument name {} is used twice", a.name)));
            }
        }
        let extras = |fetch: &mut Vec<Fetch>| {
            let mut pair_field = None;
            if let PairingKey::Register(r) = &f.pairing {
                fetch.push(Fetch::new(
                    PAIR_FIELD,
                    FetchValue::Int {
                        at: ArgLocation::Register(*r),
                        ty: IntType::X64,
                    },
                ));
                pair_field = Some(PAIR_FIELD.to_string());
            }
            let mut comm_field = None;
            if self.record_comm {
                fetch.push(Fetch::new(COMM_FIELD, FetchValue::Comm));
                comm_field = Some(COMM_FIELD.to_string());
            }
            (pair_field, comm_field)
        };
        let mut probes = Vec::new();
        for off in &f.entry_offsets {
            let mut fetch = entry_fetch.clone();
            let (pair_field, comm_field) = extras(&mut fetch);
            probes.push(KernelProbe {
                path: f.probe_path.clone(),
                offset: *off,
                kind: ProbeKind::Entry,
                arch,
                fetches: fetch,
                function: id,
                role: Role::Entry,
                args: entry_args.clone(),
                pair_field,
                comm_field,
                return_address_field: None,
                filter: None,
                entry_choice: None,
            });
        }
        let ret_ty = f.ret.unwrap_or(ValueType::Int(IntType::X64));
        let ret_probes: Vec<(ProbeKind, FileOffset)> = match &f.returns {
            Returns::None => vec![],
            Returns::UretProbe => vec![(ProbeKind::UretProbe, f.function_offset)],
            Returns::Instructions(offs) => offs.iter().map(|o| (ProbeKind::Entry, *o)).collect(),
        };
        for (kind, off) in ret_probes {
            let (decode, mut fetch) = if f.convention.is_native() && kind == ProbeKind::UretProbe {
                typed_fetch("ret", ret_ty, &[ArgLocation::ReturnValue])
            } else {
                let words = f.convention.result_words(ret_ty.words()).ok_or_else(|| {
                    bad(format!(
                        "the {} convention does not say where a {} result is here (the function table gives no argument size); use a raw fetch-arg",
                        f.convention.label(),
                        ret_ty.label()
                    ))
                })?;
                typed_fetch("ret", ret_ty, &words)
            };
            let (pair_field, comm_field) = extras(&mut fetch);
            probes.push(KernelProbe {
                path: f.probe_path.clone(),
                offset: off,
                kind,
                arch,
                fetches: fetch,
                function: id,
                role: Role::Return,
                args: vec![LogicalArg {
                    name: "ret".into(),
                    decode,
                }],
                pair_field,
                comm_field,
                return_address_field: None,
                filter: None,
                entry_choice: None,
            });
        }
        self.functions.push(TracedFunction {
            id,
            name: f.name,
            image: f.image,
            probe_path: f.probe_path,
            function_offset: f.function_offset,
            convention: f.convention,
            pairing: f.pairing,
            symbol: f.symbol,
            arg_requests: f.args,
            ret: f.ret,
        });
        self.probes.extend(probes);
        Ok(id)
    }

    pub fn function(&self, id: FunctionId) -> &TracedFunction {
        &self.functions[id.0 as usize]
    }

    /// Records the user call stack under every hit (the kernel walks the frame pointers).
    ///
    /// A frame-pointer walk starts at the frame the base pointer names. At a function's first
    /// byte (and, in Go, after the stack-check prologue, which moves neither pointer) and on a
    /// RET instruction, the probed function has no frame of its own yet (or any more): the base
    /// pointer still names its caller's frame, so the walk misses the caller, whose return
    /// address is the word at the stack pointer on x86-64 and the link register x30 on aarch64
    /// (`ArchConventions::return_address`). Those probes also read it, and the
    /// stack puts it back in place (perf does the same for uprobes at a function's entry:
    /// `is_uprobe_at_func_entry` in the kernel's `arch/x86/events/core.c`; the tracefs walk,
    /// `arch_stack_walk_user` in `arch/x86/kernel/stacktrace.c`, does not). A uretprobe fires
    /// after the return, in the caller's frame: its walk is whole.
    pub fn record_user_stacks(&mut self) {
        self.user_stacks = true;
        for p in &mut self.probes {
            let f = &self.functions[p.function.0 as usize];
            let user_offset = self
                .user_offsets
                .iter()
                .any(|(id, off)| *id == p.function && *off != f.function_offset);
            let frameless = p.kind == ProbeKind::Entry
                && !user_offset
                && (p.offset == f.function_offset || f.convention.is_go());
            if frameless && p.return_address_field.is_none() {
                p.fetches.push(Fetch::new(
                    RETURN_ADDRESS_FIELD,
                    FetchValue::Int {
                        at: f.convention.conventions().return_address_location(),
                        ty: IntType::X64,
                    },
                ));
                p.return_address_field = Some(RETURN_ADDRESS_FIELD.to_string());
            }
        }
    }
}

/// The values to read for a typed value whose words are at `words` (one per word the type
/// takes; callers give them all), and how to decode them.
fn typed_fetch(name: &str, ty: ValueType, words: &[ArgLocation]) -> (Decode, Vec<Fetch>) {
    let word = |i: usize| {
        words
            .get(i)
            .or(words.first())
            .cloned()
            .unwrap_or(ArgLocation::ReturnValue)
    };
    match ty {
        ValueType::Int(t) => (
            Decode::Int {
                field: name.to_string(),
                ty: t,
            },
            vec![Fetch::new(name, FetchValue::Int { at: word(0), ty: t })],
        ),
        ValueType::CString => (
            Decode::CString {
                field: name.to_string(),
            },
            vec![Fetch::new(
                name,
                FetchValue::CString {
                    at: word(0).deref(0),
                },
            )],
        ),
        ValueType::DotnetString => {
            let len_field = format!("{name}_len");
            (
                Decode::Utf16 {
                    len_field: len_field.clone(),
                    chars_field: name.to_string(),
                },
                vec![
                    Fetch::new(
                        len_field,
                        FetchValue::Int {
                            at: word(0).deref(8),
                            ty: IntType::S32,
                        },
                    ),
                    Fetch::new(
                        name,
                        FetchValue::Array {
                            at: word(0).deref(12),
                            elem: IntType::U16,
                            len: STRING_PREFIX,
                        },
                    ),
                ],
            )
        }
        ValueType::GoString => {
            let len_field = format!("{name}_len");
            (
                Decode::GoString {
                    bytes_field: name.to_string(),
                    len_field: len_field.clone(),
                },
                vec![
                    Fetch::new(
                        name,
                        FetchValue::Array {
                            at: word(0).deref(0),
                            elem: IntType::U8,
                            len: STRING_PREFIX,
                        },
                    ),
                    Fetch::new(
                        len_field,
                        FetchValue::Int {
                            at: word(1),
                            ty: IntType::S64,
                        },
                    ),
                ],
            )
        }
    }
}
