//! Probe plans: the language-agnostic model between "which functions, which arguments" and the
//! kernel probes that observe them.
//!
//! A *traced function* may need several kernel probes: a C function has one entry uprobe and one
//! uretprobe; a Go function has an entry probe after its stack-check prologue and one plain uprobe
//! per RET instruction (a uretprobe crashes Go programs whose stack grows,
//! `../shared/ENVIRONMENT.md`); a .NET method has an entry probe whose fetch-args decode `this` and
//! string fields. Each [`KernelProbe`] says which function it belongs to and in which [`Role`], so
//! every recorded hit decodes back to "function F, entry/return, these argument values".
//!
//! Build plans with [`ProbePlan::add_function`] from a [`FunctionPlan`]; the session turns each
//! `KernelProbe` into a `uprobe_events` line and decodes records with [`ProbePlan::decode`].

use crate::error::{Error, Result};
use crate::tracefs::format::{EventFormat, Field, FieldKind};
use crate::tracefs::probe::{ArrayElem, FetchArg, FetchType};
use netprobe_core::addr::FileOffset;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// Index of a traced function in its plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct FunctionId(pub u32);

/// Whether a probe observes a function's entry or its return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Entry,
    Return,
}

/// How the kernel places a probe: a plain uprobe on an instruction, or a uretprobe (entry
/// breakpoint that hijacks the return address and fires on return).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    Entry,
    UretProbe,
}

/// Where integer arguments arrive, by position (x86_64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallingConvention {
    /// System V AMD64 (C, C++, Rust `extern "C"`, and .NET managed code on Linux, where `this`
    /// comes first): rdi, rsi, rdx, rcx, r8, r9; result in rax.
    SysV,
    /// Go's register ABI (Go 1.17+, `ABIInternal`): rax, rbx, rcx, rdi, rsi, r8, r9, r10, r11;
    /// results from rax on; the current goroutine in r14.
    GoRegAbi,
    /// Go's stack ABI (`ABI0`, every Go function before 1.17): argument word `i` at
    /// `8 + 8*i(%sp)` at entry (and after the stack-check prologue, which moves nothing); results
    /// follow the arguments, so they end where the in/out area of `args_size` bytes ends (the
    /// pclntab's `args` field; `None` when the table does not say).
    GoStackAbi { args_size: Option<u32> },
}

/// Where a return probe reads the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnSite {
    /// On a RET instruction, before it executes (SP points at the return address).
    RetInstruction,
    /// In a uretprobe, after the return (SP is 8 bytes above the return address's slot).
    AfterReturn,
}

impl CallingConvention {
    /// Integer argument registers in order, as uprobe fetch-args name them (`%di`); empty for the
    /// stack ABI.
    pub fn int_registers(self) -> &'static [&'static str] {
        match self {
            CallingConvention::SysV => &["di", "si", "dx", "cx", "r8", "r9"],
            CallingConvention::GoRegAbi => {
                &["ax", "bx", "cx", "di", "si", "r8", "r9", "r10", "r11"]
            }
            CallingConvention::GoStackAbi { .. } => &[],
        }
    }

    /// How many integer argument words can be named by position (stack ABI: any number; 64 is
    /// far beyond what a probe line holds anyway).
    pub fn arg_words(self) -> usize {
        match self {
            CallingConvention::GoStackAbi { .. } => 64,
            c => c.int_registers().len(),
        }
    }

    /// The fetch-arg reading integer argument word `word` at entry: `%di`, or `+8(%sp)` for
    /// the stack ABI (`netprobe_core::golang::GoAbi::arg`); `None` past the registers.
    pub fn arg_word(self, word: usize) -> Option<String> {
        match self {
            CallingConvention::GoStackAbi { .. } => netprobe_core::golang::GoAbi::Stack
                .arg(word)
                .map(|w| w.fetcharg()),
            c => c.int_registers().get(word).map(|r| format!("%{r}")),
        }
    }

    /// The fetch-arg of stack argument slot `slot` at a function's entry (first byte), where
    /// `0(%sp)` holds the return address and the caller's stack arguments follow it, one 8-byte
    /// slot each: `+8(%sp)`, `+16(%sp)`, ... (System V AMD64 ABI 3.2.3, Figure 3.4 "Stack frame";
    /// Go `abi-internal.md`: stack-assigned arguments start right above the return PC).
    pub fn stack_slot(slot: usize) -> String {
        format!("+{}(%sp)", 8 + 8 * slot)
    }

    /// The fetch-args reading a `words`-word result at `site`; `None` when they cannot be
    /// placed (stack ABI without the argument size, or a result larger than it).
    ///
    /// Register conventions: the result registers (Go: rax, rbx, ... like arguments,
    /// `abi-internal.md`; System V: rax, rdx). Stack ABI: the result is the last `words` words
    /// of the in/out area (one result: the results follow the arguments), which starts at
    /// `8(%sp)` on a RET and at `0(%sp)` after the return.
    pub fn result_words(self, words: usize, site: ReturnSite) -> Option<Vec<String>> {
        match self {
            CallingConvention::SysV => Some(
                ["%ax", "%dx"]
                    .iter()
                    .take(words)
                    .map(|r| r.to_string())
                    .collect(),
            )
            .filter(|v: &Vec<String>| v.len() == words),
            CallingConvention::GoRegAbi => (0..words)
                .map(|i| {
                    netprobe_core::golang::GoAbi::Register
                        .result(i, 0)
                        .map(|w| w.fetcharg())
                })
                .collect(),
            CallingConvention::GoStackAbi { args_size } => {
                let area = u64::from(args_size?);
                let first = area.checked_sub(8 * words as u64)?;
                let base = match site {
                    ReturnSite::RetInstruction => 8,
                    ReturnSite::AfterReturn => 0,
                };
                Some(
                    (0..words as u64)
                        .map(|i| format!("+{}(%sp)", base + first + 8 * i))
                        .collect(),
                )
            }
        }
    }

    /// The register holding the (first) integer result.
    pub fn return_register(self) -> &'static str {
        "ax"
    }

    pub fn label(self) -> &'static str {
        match self {
            CallingConvention::SysV => "System V",
            CallingConvention::GoRegAbi => "Go register ABI",
            CallingConvention::GoStackAbi { .. } => "Go stack ABI",
        }
    }

    /// Whether this is one of Go's conventions.
    pub fn is_go(self) -> bool {
        matches!(
            self,
            CallingConvention::GoRegAbi | CallingConvention::GoStackAbi { .. }
        )
    }
}

/// The type of a logical argument (what users write after an argument's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgType {
    /// An integer: `u8`..`u64`, `s8`..`s64`, `x8`..`x64` (hex).
    Int(FetchType),
    /// A NUL-terminated C string the register points to (`+0(%di):string`).
    CString,
    /// A .NET `System.String` the register points to: int32 length at +8, UTF-16 chars from +12
    /// (`../shared/ENVIRONMENT.md`); the first 64 chars are fetched (kernel array limit).
    DotnetString,
    /// A Go string passed in two registers (pointer, length); the first 64 bytes are fetched.
    GoString,
}

impl ArgType {
    /// Parses a type as users write it: kernel integer types, `string`/`str`, `utf16`/`dotnet`,
    /// `gostring`.
    pub fn parse(s: &str) -> Option<ArgType> {
        match s {
            "string" | "str" | "cstring" => Some(ArgType::CString),
            "utf16" | "dotnet_string" | "dnstring" => Some(ArgType::DotnetString),
            "gostring" | "go_string" => Some(ArgType::GoString),
            _ => match FetchType::parse(s)? {
                FetchType::String | FetchType::Array { .. } => None,
                t => Some(ArgType::Int(t)),
            },
        }
    }

    /// How many argument registers the type takes.
    pub fn registers(self) -> usize {
        match self {
            ArgType::GoString => 2,
            _ => 1,
        }
    }

    pub fn label(self) -> String {
        match self {
            ArgType::Int(t) => t.kernel_name(),
            ArgType::CString => "string".into(),
            ArgType::DotnetString => "utf16".into(),
            ArgType::GoString => "gostring".into(),
        }
    }
}

/// An argument the user asked for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgRequest {
    /// The next argument(s) by position in the calling convention, with a type and an optional name
    /// (default `arg0`, `arg1`, ... by position).
    Positional { name: Option<String>, ty: ArgType },
    /// A raw kernel fetch-arg expression (`+8(%si)`, `%r14`, `+0(+8(%di))`), typed.
    Raw {
        name: String,
        expr: String,
        ty: FetchType,
    },
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
    Register(String),
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
    pub ret: Option<ArgType>,
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
    pub ret: Option<ArgType>,
}

/// One logical value decoded from one or more fetch-args of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decode {
    /// An integer field.
    Int { field: String, ty: FetchType },
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
    /// A raw `u8[N]`/`u16[N]` fetch-arg: every element.
    Array { field: String, elem_size: usize },
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
    pub fetchargs: Vec<FetchArg>,
    pub function: FunctionId,
    pub role: Role,
    /// How to turn this probe's fields back into named values.
    pub args: Vec<LogicalArg>,
    /// Field holding the pairing key, when pairing by register.
    pub pair_field: Option<String>,
    /// Field holding `$comm`, when recorded.
    pub comm_field: Option<String>,
}

/// Functions and the kernel probes that observe them.
#[derive(Clone, Debug, Default)]
pub struct ProbePlan {
    pub functions: Vec<TracedFunction>,
    pub probes: Vec<KernelProbe>,
    /// Record the task's command name (`$comm`) with every hit.
    pub record_comm: bool,
    /// What the user should know about how the functions are probed (why RET probes instead of
    /// uretprobes, where an entry probe sits, warnings): one line each, printed on stderr by the
    /// live commands and as comments by `--dry-run`. Language modules (`crate::lang`) add them.
    pub notes: Vec<String>,
    /// Functions the user gave as a raw `IMAGE:0xOFFSET`, with that offset: the probe-safety
    /// gate (`crate::gate`) checks a probe there against whatever function encloses it, and
    /// `--unsafe-offset` may override its refusal.
    pub user_offsets: Vec<(FunctionId, FileOffset)>,
}

const COMM_FIELD: &str = "np_comm";
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
        // Entry fetch-args. Register conventions pass an argument that no longer fits in the
        // remaining registers on the stack, whole, and later arguments still take registers that
        // are left (System V AMD64 ABI 3.2.3 "Parameter Passing"; Go `abi-internal.md`, "Function
        // call argument and result passing": a failed register assignment is reset and the value
        // is stack-assigned). Stack words are read relative to the stack pointer a call enters
        // with, so only where the probe sees it: at the function's first byte, or (Go) after a
        // stack-check prologue that `lang::go` checked does not move it.
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
                    let need = ty.registers();
                    let regs = f.convention.int_registers().len();
                    let in_registers = matches!(f.convention, CallingConvention::GoStackAbi { .. })
                        || next_word + need <= regs;
                    let words: Option<Vec<String>> = if in_registers {
                        (next_word..next_word + need)
                            .map(|w| f.convention.arg_word(w))
                            .collect()
                    } else if sp_is_entry_sp {
                        let w = (next_stack_slot..next_stack_slot + need)
                            .map(CallingConvention::stack_slot)
                            .collect();
                        next_stack_slot += need;
                        Some(w)
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
                ArgRequest::Raw { name, expr, ty } => {
                    let decode = match ty {
                        FetchType::String => Decode::CString {
                            field: name.clone(),
                        },
                        FetchType::Array { elem, .. } => Decode::Array {
                            field: name.clone(),
                            elem_size: match elem {
                                ArrayElem::U8 => 1,
                                ArrayElem::U16 => 2,
                            },
                        },
                        _ => Decode::Int {
                            field: name.clone(),
                            ty: *ty,
                        },
                    };
                    entry_args.push(LogicalArg {
                        name: name.clone(),
                        decode,
                    });
                    entry_fetch.push(FetchArg::new(name.clone(), expr.clone(), *ty));
                }
            }
        }
        for (i, a) in entry_args.iter().enumerate() {
            if entry_args[..i].iter().any(|b| b.name == a.name) {
                return Err(bad(format!("argument name {} is used twice", a.name)));
            }
        }
        let extras = |fetch: &mut Vec<FetchArg>| {
            let mut pair_field = None;
            if let PairingKey::Register(r) = &f.pairing {
                fetch.push(FetchArg::new(PAIR_FIELD, format!("%{r}"), FetchType::X64));
                pair_field = Some(PAIR_FIELD.to_string());
            }
            let mut comm_field = None;
            if self.record_comm {
                fetch.push(FetchArg::new(COMM_FIELD, "$comm", FetchType::String));
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
                fetchargs: fetch,
                function: id,
                role: Role::Entry,
                args: entry_args.clone(),
                pair_field,
                comm_field,
            });
        }
        let ret_ty = f.ret.unwrap_or(ArgType::Int(FetchType::X64));
        let ret_rets: Vec<(ProbeKind, FileOffset, ReturnSite)> = match &f.returns {
            Returns::None => vec![],
            Returns::UretProbe => vec![(
                ProbeKind::UretProbe,
                f.function_offset,
                ReturnSite::AfterReturn,
            )],
            Returns::Instructions(offs) => offs
                .iter()
                .map(|o| (ProbeKind::Entry, *o, ReturnSite::RetInstruction))
                .collect(),
        };
        for (kind, off, site) in ret_rets {
            let (decode, mut fetch) = if f.convention == CallingConvention::SysV
                && site == ReturnSite::AfterReturn
            {
                typed_fetch("ret", ret_ty, &["$retval".to_string()])
            } else {
                let words = f
                    .convention
                    .result_words(ret_ty.registers(), site)
                    .ok_or_else(|| {
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
                fetchargs: fetch,
                function: id,
                role: Role::Return,
                args: vec![LogicalArg {
                    name: "ret".into(),
                    decode,
                }],
                pair_field,
                comm_field,
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

    /// Decodes one record of probe `probe` (whose event format is `format`) into a hit.
    /// `None` when the record is too short for the common header (never a panic).
    pub fn decode(&self, probe: usize, format: &EventFormat, ts: u64, data: &[u8]) -> Option<Hit> {
        let kp = self.probes.get(probe)?;
        let tid = read_field_int(format.field("common_pid")?, data)? as u32;
        let mut args = Vec::with_capacity(kp.args.len());
        for a in &kp.args {
            args.push((a.name.clone(), decode_arg(&a.decode, format, data)));
        }
        let pair_key = match &kp.pair_field {
            Some(f) => format
                .field(f)
                .and_then(|f| read_field_int(f, data))
                .unwrap_or(0),
            None => tid as u64,
        };
        let comm = kp.comm_field.as_ref().and_then(|f| {
            let field = format.field(f)?;
            match read_data_loc(field, data)? {
                [] => None,
                bytes => Some(c_string(bytes).0),
            }
        });
        Some(Hit {
            ts_ns: ts,
            tid,
            probe,
            function: kp.function,
            role: kp.role,
            args,
            pair_key,
            comm,
        })
    }
}

/// The fetch-args for a typed value whose words are read by `words` (`%di`, `+8(%sp)`,
/// `$retval`, one per word the type takes), and how to decode them.
fn typed_fetch(name: &str, ty: ArgType, words: &[String]) -> (Decode, Vec<FetchArg>) {
    let reg = |i: usize| words.get(i).cloned().unwrap_or_else(|| "%ax".to_string());
    match ty {
        ArgType::Int(t) => (
            Decode::Int {
                field: name.to_string(),
                ty: t,
            },
            vec![FetchArg::new(name, reg(0), t)],
        ),
        ArgType::CString => (
            Decode::CString {
                field: name.to_string(),
            },
            vec![FetchArg::new(
                name,
                format!("+0({})", reg(0)),
                FetchType::String,
            )],
        ),
        ArgType::DotnetString => {
            let len_field = format!("{name}_len");
            (
                Decode::Utf16 {
                    len_field: len_field.clone(),
                    chars_field: name.to_string(),
                },
                vec![
                    FetchArg::new(len_field, format!("+8({})", reg(0)), FetchType::S32),
                    FetchArg::new(
                        name,
                        format!("+12({})", reg(0)),
                        FetchType::Array {
                            elem: ArrayElem::U16,
                            len: 64,
                        },
                    ),
                ],
            )
        }
        ArgType::GoString => {
            let len_field = format!("{name}_len");
            (
                Decode::GoString {
                    bytes_field: name.to_string(),
                    len_field: len_field.clone(),
                },
                vec![
                    FetchArg::new(
                        name,
                        format!("+0({})", reg(0)),
                        FetchType::Array {
                            elem: ArrayElem::U8,
                            len: 64,
                        },
                    ),
                    FetchArg::new(len_field, reg(1), FetchType::S64),
                ],
            )
        }
    }
}

/// A decoded hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// CLOCK_MONOTONIC nanoseconds (the instance's `mono` trace clock).
    pub ts_ns: u64,
    /// The thread that hit the probe (`common_pid` is the kernel's task pid, i.e. the tid).
    pub tid: u32,
    /// Index into [`ProbePlan::probes`].
    pub probe: usize,
    pub function: FunctionId,
    pub role: Role,
    pub args: Vec<(String, Value)>,
    /// The latency pairing key: the tid, or the fetched register.
    pub pair_key: u64,
    pub comm: Option<String>,
}

/// A decoded argument value.
///
/// JSON: integers as numbers, hex values as `"0x..."` strings, strings as strings (a cut string
/// as `{"text": ..., "truncated": true, "length": N}`), a fault as `null`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Signed(i64),
    Unsigned(u64),
    /// Printed as `0x...`.
    Hex(u64),
    /// A string; `truncated` when only its first part was fetched (kernel array limit of 64).
    Str {
        text: String,
        truncated: bool,
        /// The full length as the object says (.NET/Go strings), when known.
        length: Option<i64>,
    },
    /// The elements of a raw array fetch-arg, printed like the kernel prints them (`{1,2,3}`).
    List(Vec<u64>),
    /// The kernel could not read the memory (bad pointer, paged out), or the field is missing.
    Fault,
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Value::Signed(v) => s.serialize_i64(*v),
            Value::Unsigned(v) => s.serialize_u64(*v),
            Value::Hex(v) => s.serialize_str(&format!("{v:#x}")),
            Value::Str {
                text,
                truncated: false,
                ..
            } => s.serialize_str(text),
            Value::Str { text, length, .. } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("text", text)?;
                m.serialize_entry("truncated", &true)?;
                m.serialize_entry("length", length)?;
                m.end()
            }
            Value::List(items) => items.serialize(s),
            Value::Fault => s.serialize_none(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Signed(v) => write!(f, "{v}"),
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Hex(v) => write!(f, "{v:#x}"),
            Value::Str {
                text,
                truncated,
                length,
            } => {
                write!(f, "{text:?}")?;
                if *truncated {
                    match length {
                        Some(n) => write!(f, "...(cut at 64 of {n})")?,
                        None => write!(f, "...(cut)")?,
                    }
                }
                Ok(())
            }
            Value::List(items) => {
                write!(f, "{{")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ",")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "}}")
            }
            Value::Fault => write!(f, "(fault)"),
        }
    }
}

fn read_le(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = data.get(offset..offset.checked_add(size)?)?;
    let mut buf = [0u8; 8];
    buf.get_mut(..size)?.copy_from_slice(b);
    Some(u64::from_le_bytes(buf))
}

/// An integer field's raw value (zero-extended).
fn read_field_int(field: &Field, data: &[u8]) -> Option<u64> {
    if !(1..=8).contains(&field.size) {
        return None;
    }
    read_le(data, field.offset, field.size)
}

/// The bytes a `__data_loc`/`__rel_loc` field points to.
fn read_data_loc<'a>(field: &Field, data: &'a [u8]) -> Option<&'a [u8]> {
    let word = read_le(data, field.offset, 4)? as u32;
    let len = (word >> 16) as usize;
    let mut off = (word & 0xffff) as usize;
    if field.kind == FieldKind::RelLoc {
        off = off.checked_add(field.offset + 4)?;
    }
    data.get(off..off.checked_add(len)?)
}

/// Text of a C string field (up to the first NUL), lossily decoded; and whether a NUL was found.
fn c_string(bytes: &[u8]) -> (String, bool) {
    match bytes.iter().position(|&b| b == 0) {
        Some(n) => (String::from_utf8_lossy(&bytes[..n]).into_owned(), true),
        None => (String::from_utf8_lossy(bytes).into_owned(), false),
    }
}

fn int_value(raw: u64, ty: FetchType) -> Value {
    let sign = |bits: u32| {
        let shift = 64 - bits;
        Value::Signed(((raw << shift) as i64) >> shift)
    };
    match ty {
        FetchType::S8 => sign(8),
        FetchType::S16 => sign(16),
        FetchType::S32 => sign(32),
        FetchType::S64 => sign(64),
        t if t.is_hex() => Value::Hex(raw),
        _ => Value::Unsigned(raw),
    }
}

fn decode_arg(d: &Decode, format: &EventFormat, data: &[u8]) -> Value {
    match d {
        Decode::Int { field, ty } => format
            .field(field)
            .and_then(|f| read_field_int(f, data))
            .map(|raw| int_value(raw, *ty))
            .unwrap_or(Value::Fault),
        Decode::CString { field } => match format.field(field).and_then(|f| read_data_loc(f, data))
        {
            // The kernel stores a zero-length string when it could not read the memory.
            None | Some([]) => Value::Fault,
            Some(bytes) => Value::Str {
                text: c_string(bytes).0,
                truncated: false,
                length: None,
            },
        },
        Decode::Utf16 {
            len_field,
            chars_field,
        } => {
            let len = format
                .field(len_field)
                .and_then(|f| read_field_int(f, data))
                .map(|raw| raw as u32 as i32);
            let chars = format.field(chars_field).and_then(|f| {
                let FieldKind::Array { len } = f.kind else {
                    return None;
                };
                let b = data.get(f.offset..f.offset.checked_add(len.checked_mul(2)?)?)?;
                Some(
                    b.chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .collect::<Vec<u16>>(),
                )
            });
            match (len, chars) {
                (Some(n), Some(units)) if n >= 0 => {
                    let take = (n as usize).min(units.len());
                    Value::Str {
                        text: String::from_utf16_lossy(&units[..take]),
                        truncated: (n as usize) > units.len(),
                        length: Some(n as i64),
                    }
                }
                _ => Value::Fault,
            }
        }
        Decode::Array { field, elem_size } => format
            .field(field)
            .and_then(|f| {
                let FieldKind::Array { len } = f.kind else {
                    return None;
                };
                let bytes =
                    data.get(f.offset..f.offset.checked_add(len.checked_mul(*elem_size)?)?)?;
                Some(Value::List(
                    bytes
                        .chunks_exact(*elem_size)
                        .map(|c| read_le(c, 0, *elem_size).unwrap_or(0))
                        .collect(),
                ))
            })
            .unwrap_or(Value::Fault),
        Decode::GoString {
            bytes_field,
            len_field,
        } => {
            let len = format
                .field(len_field)
                .and_then(|f| read_field_int(f, data))
                .map(|raw| raw as i64);
            let bytes = format.field(bytes_field).and_then(|f| {
                let FieldKind::Array { len } = f.kind else {
                    return None;
                };
                data.get(f.offset..f.offset.checked_add(len)?)
            });
            match (len, bytes) {
                (Some(n), Some(b)) if n >= 0 => {
                    let take = (n as usize).min(b.len());
                    Value::Str {
                        text: String::from_utf8_lossy(&b[..take]).into_owned(),
                        truncated: (n as usize) > b.len(),
                        length: Some(n),
                    }
                }
                _ => Value::Fault,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c_function(args: Vec<ArgRequest>, returns: Returns) -> FunctionPlan {
        FunctionPlan {
            name: "add".into(),
            image: "/bin/x".into(),
            probe_path: "/bin/x".into(),
            function_offset: FileOffset(0x1139),
            entry_offsets: vec![FileOffset(0x1139)],
            returns,
            convention: CallingConvention::SysV,
            args,
            ret: Some(ArgType::Int(FetchType::S32)),
            pairing: PairingKey::Thread,
            symbol: Some("add".into()),
        }
    }

    fn pos(name: &str, ty: ArgType) -> ArgRequest {
        ArgRequest::Positional {
            name: Some(name.into()),
            ty,
        }
    }

    #[test]
    fn c_function_gets_entry_and_uretprobe() {
        let mut plan = ProbePlan::new(true);
        plan.add_function(c_function(
            vec![
                pos("a", ArgType::Int(FetchType::S32)),
                pos("b", ArgType::Int(FetchType::X64)),
                pos("s", ArgType::CString),
            ],
            Returns::UretProbe,
        ))
        .unwrap();
        assert_eq!(plan.probes.len(), 2);
        let e = &plan.probes[0];
        let rendered: Vec<String> = e.fetchargs.iter().map(|a| a.render()).collect();
        assert_eq!(
            rendered,
            [
                "a=%di:s32",
                "b=%si:x64",
                "s=+0(%dx):string",
                "np_comm=$comm:string"
            ]
        );
        let r = &plan.probes[1];
        assert_eq!(r.kind, ProbeKind::UretProbe);
        assert_eq!(r.role, Role::Return);
        assert_eq!(r.fetchargs[0].render(), "ret=$retval:s32");
    }

    #[test]
    fn go_function_gets_ret_instruction_probes_and_goroutine_pairing() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(FunctionPlan {
            name: "main.add".into(),
            image: "/bin/g".into(),
            probe_path: "/bin/g".into(),
            function_offset: FileOffset(0x100),
            entry_offsets: vec![FileOffset(0x10a)],
            returns: Returns::Instructions(vec![FileOffset(0x130), FileOffset(0x150)]),
            convention: CallingConvention::GoRegAbi,
            args: vec![
                pos("a", ArgType::Int(FetchType::S64)),
                pos("s", ArgType::GoString),
                pos("b", ArgType::Int(FetchType::S64)),
            ],
            ret: Some(ArgType::Int(FetchType::S64)),
            pairing: PairingKey::Register("r14".into()),
            symbol: None,
        })
        .unwrap();
        assert_eq!(plan.probes.len(), 3);
        let r: Vec<String> = plan.probes[0]
            .fetchargs
            .iter()
            .map(|a| a.render())
            .collect();
        assert_eq!(
            r,
            [
                "a=%ax:s64",
                "s=+0(%bx):u8[64]",
                "s_len=%cx:s64",
                "b=%di:s64",
                "np_pair=%r14:x64"
            ]
        );
        for p in &plan.probes[1..] {
            assert_eq!(p.kind, ProbeKind::Entry);
            assert_eq!(p.role, Role::Return);
            assert_eq!(p.fetchargs[0].render(), "ret=%ax:s64");
        }
    }

    /// Go before 1.17: `func Getenv(key string) string` has a 32-byte in/out area (key: ptr,
    /// len; result: ptr, len), as esbuild 0.8.57 (go1.16) compiles it: the body reads the key at
    /// 0x38/0x40(SP) after `sub rsp, 0x30` and stores the result at 0x48/0x50(SP).
    #[test]
    fn go_stack_abi_reads_arguments_and_results_from_sp() {
        let conv = CallingConvention::GoStackAbi {
            args_size: Some(32),
        };
        let mut plan = ProbePlan::new(false);
        plan.add_function(FunctionPlan {
            name: "os.Getenv".into(),
            image: "/bin/g".into(),
            probe_path: "/bin/g".into(),
            function_offset: FileOffset(0xc5c00),
            entry_offsets: vec![FileOffset(0xc5c0f)],
            returns: Returns::Instructions(vec![FileOffset(0xc5c6a)]),
            convention: conv,
            args: vec![
                pos("key", ArgType::GoString),
                pos("n", ArgType::Int(FetchType::S64)),
            ],
            ret: Some(ArgType::GoString),
            pairing: PairingKey::Thread,
            symbol: None,
        })
        .unwrap();
        let render = |i: usize| -> Vec<String> {
            plan.probes[i]
                .fetchargs
                .iter()
                .map(|a| a.render())
                .collect()
        };
        assert_eq!(
            render(0),
            [
                "key=+0(+8(%sp)):u8[64]",
                "key_len=+16(%sp):s64",
                "n=+24(%sp):s64"
            ]
        );
        assert_eq!(
            render(1),
            ["ret=+0(+24(%sp)):u8[64]", "ret_len=+32(%sp):s64"]
        );
        // After the return (uretprobe) SP is 8 bytes higher.
        assert_eq!(
            conv.result_words(1, ReturnSite::AfterReturn),
            Some(vec!["+24(%sp)".to_string()])
        );
        assert_eq!(
            conv.result_words(1, ReturnSite::RetInstruction),
            Some(vec!["+32(%sp)".to_string()])
        );
        // A result larger than the area, or an unknown area, cannot be placed.
        assert_eq!(conv.result_words(5, ReturnSite::RetInstruction), None);
        let unknown = CallingConvention::GoStackAbi { args_size: None };
        assert_eq!(unknown.result_words(1, ReturnSite::RetInstruction), None);
        assert_eq!(unknown.arg_word(3).as_deref(), Some("+32(%sp)"));
    }

    #[test]
    fn result_registers_by_convention() {
        assert_eq!(
            CallingConvention::GoRegAbi.result_words(2, ReturnSite::RetInstruction),
            Some(vec!["%ax".to_string(), "%bx".to_string()])
        );
        assert_eq!(
            CallingConvention::SysV.result_words(1, ReturnSite::RetInstruction),
            Some(vec!["%ax".to_string()])
        );
        assert_eq!(
            CallingConvention::SysV.result_words(3, ReturnSite::AfterReturn),
            None
        );
    }

    /// A uretprobe on a Go function reads the result registers, not `$retval` (which is RAX
    /// only: a Go string result is RAX and RBX).
    #[test]
    fn go_uretprobe_reads_result_registers() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(FunctionPlan {
            name: "main.Echo".into(),
            image: "/bin/g".into(),
            probe_path: "/bin/g".into(),
            function_offset: FileOffset(0x100),
            entry_offsets: vec![],
            returns: Returns::UretProbe,
            convention: CallingConvention::GoRegAbi,
            args: vec![],
            ret: Some(ArgType::GoString),
            pairing: PairingKey::Register("r14".into()),
            symbol: None,
        })
        .unwrap();
        let p = &plan.probes[0];
        assert_eq!(p.kind, ProbeKind::UretProbe);
        let r: Vec<String> = p.fetchargs.iter().map(|a| a.render()).collect();
        assert_eq!(
            r,
            ["ret=+0(%ax):u8[64]", "ret_len=%bx:s64", "np_pair=%r14:x64"]
        );
    }

    #[test]
    fn arguments_past_the_registers_come_from_the_stack_at_entry() {
        let int = |n| {
            (0..n)
                .map(|_| ArgRequest::Positional {
                    name: None,
                    ty: ArgType::Int(FetchType::U64),
                })
                .collect::<Vec<_>>()
        };
        let fetches = |plan: &ProbePlan| -> Vec<String> {
            plan.probes[0]
                .fetchargs
                .iter()
                .map(|a| a.expr.clone())
                .collect()
        };
        // System V: the 7th and 8th integer arguments at +8(%sp), +16(%sp).
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(int(8), Returns::None))
            .unwrap();
        assert_eq!(
            fetches(&plan),
            ["%di", "%si", "%dx", "%cx", "%r8", "%r9", "+8(%sp)", "+16(%sp)"]
        );
        // A two-word argument that does not fit in the last register goes to the stack whole;
        // the next one-word argument still takes that register (System V 3.2.3).
        let mut args = int(5);
        args.push(ArgRequest::Positional {
            name: None,
            ty: ArgType::GoString,
        });
        args.extend(int(1));
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(args, Returns::None)).unwrap();
        let f = fetches(&plan);
        assert_eq!(&f[..5], ["%di", "%si", "%dx", "%cx", "%r8"]);
        // gostring: the bytes at the pointer word, then the length word.
        assert_eq!(&f[5..7], ["+0(+8(%sp))", "+16(%sp)"]);
        assert_eq!(f[7], "%r9");
        // Go register ABI: nine registers, then the stack.
        let mut go = c_function(int(10), Returns::None);
        go.convention = CallingConvention::GoRegAbi;
        let mut plan = ProbePlan::new(false);
        plan.add_function(go).unwrap();
        assert_eq!(fetches(&plan)[8..], ["%r11", "+8(%sp)"]);
        // Not at the first byte: the stack offset is unknown, so stack arguments are refused.
        let mut inside = c_function(int(7), Returns::None);
        inside.entry_offsets = vec![FileOffset(inside.function_offset.0 + 4)];
        let e = ProbePlan::new(false).add_function(inside).unwrap_err();
        assert!(e.to_string().contains("first byte"), "{e}");
    }

    /// A record laid out as the kernel formats the probe's fields.
    #[test]
    fn decodes_records() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(
            vec![
                pos("a", ArgType::Int(FetchType::S32)),
                pos("b", ArgType::Int(FetchType::X64)),
                pos("s", ArgType::CString),
                pos("name", ArgType::DotnetString),
            ],
            Returns::None,
        ))
        .unwrap();
        let fmt = EventFormat::parse("name: add\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:s32 a;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:u64 b;\toffset:20;\tsize:8;\tsigned:0;\n\tfield:__data_loc char[] s;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:s32 name_len;\toffset:32;\tsize:4;\tsigned:1;\n\tfield:u16 name[];\toffset:36;\tsize:128;\tsigned:0;\n").unwrap();
        let mut rec = vec![0u8; 164];
        rec[0..2].copy_from_slice(&7u16.to_le_bytes());
        rec[4..8].copy_from_slice(&4242i32.to_le_bytes());
        rec[16..20].copy_from_slice(&(-5i32).to_le_bytes());
        rec[20..28].copy_from_slice(&0xabcu64.to_le_bytes());
        rec[32..36].copy_from_slice(&70i32.to_le_bytes());
        for (i, c) in "héllo"
            .encode_utf16()
            .chain(std::iter::repeat(b'x' as u16))
            .take(64)
            .enumerate()
        {
            rec[36 + 2 * i..38 + 2 * i].copy_from_slice(&c.to_le_bytes());
        }
        let s_off = rec.len() as u32;
        rec.extend_from_slice(b"hey\0");
        rec[28..32].copy_from_slice(&((4u32 << 16) | s_off).to_le_bytes());
        let hit = plan.decode(0, &fmt, 99, &rec).unwrap();
        assert_eq!(hit.tid, 4242);
        assert_eq!(hit.pair_key, 4242);
        assert_eq!(hit.args[0].1, Value::Signed(-5));
        assert_eq!(hit.args[1].1, Value::Hex(0xabc));
        assert_eq!(hit.args[2].1.to_string(), "\"hey\"");
        match &hit.args[3].1 {
            Value::Str {
                text,
                truncated,
                length,
            } => {
                assert!(text.starts_with("héllo"));
                assert_eq!(text.chars().count(), 64);
                assert!(*truncated);
                assert_eq!(*length, Some(70));
            }
            v => panic!("{v:?}"),
        }
        // A zero-length string is the kernel's fault marker.
        rec[28..32].copy_from_slice(&(s_off).to_le_bytes());
        assert_eq!(
            plan.decode(0, &fmt, 99, &rec).unwrap().args[2].1,
            Value::Fault
        );
        // Short records decode what is there and never panic.
        for n in 0..rec.len() {
            let _ = plan.decode(0, &fmt, 0, &rec[..n]);
        }
    }

    #[test]
    fn arg_types_parse() {
        assert_eq!(ArgType::parse("s32"), Some(ArgType::Int(FetchType::S32)));
        assert_eq!(ArgType::parse("string"), Some(ArgType::CString));
        assert_eq!(ArgType::parse("utf16"), Some(ArgType::DotnetString));
        assert_eq!(ArgType::parse("u16[4]"), None);
        assert_eq!(ArgType::parse("nope"), None);
    }
}
