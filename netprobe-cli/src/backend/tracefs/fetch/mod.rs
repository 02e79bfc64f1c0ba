//! A neutral plan's values as uprobe fetch-args (kernel `Documentation/trace/uprobetracer.rst`,
//! "Fetch-args"): `%di`, `+8(%sp)`, `+12(%di):u16[64]`, `$retval`, `$comm`, and the user's raw
//! `FETCHARG:TYPE` text, which only this backend reads.
//!
//! Register names are the probed image's architecture's, as its kernel's
//! `regs_query_register_offset` table spells them (`netprobe_core::abi::Register`): `%di`, `%r14`
//! on x86-64, `%x0` .. `%x30` on aarch64, `%sp` on both. The plan already chose them by the
//! image's architecture; here only the stack pointer after a return differs
//! (`ArchConventions::sp_after_return`).

use super::probe::{check_identifier, invalid, MAX_ARG_EXPR_LEN, MAX_ARG_NAME_LEN};
use crate::error::Result;
pub use crate::fetch_type::{parse_raw, ArrayElem, FetchType, MAX_ARRAY_LEN};
use crate::plan::{Fetch, FetchValue, KernelProbe, ProbeKind};
use netprobe_core::abi::{ArchConventions, ArgLocation, IntType};
use netprobe_core::arch::Arch;

/// One fetch-arg of a probe line: `NAME=EXPR:TYPE`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchArg {
    pub name: String,
    /// A register (`%di`), a memory dereference (`+8(%si)`), `$retval`, `$comm`, ...
    pub expr: String,
    pub ty: FetchType,
}

impl FetchArg {
    pub fn new(name: impl Into<String>, expr: impl Into<String>, ty: FetchType) -> FetchArg {
        FetchArg {
            name: name.into(),
            expr: expr.into(),
            ty,
        }
    }

    /// `NAME=EXPR:TYPE`.
    pub fn render(&self) -> String {
        format!("{}={}:{}", self.name, self.expr, self.ty.kernel_name())
    }

    /// Checks the name and expression the kernel would refuse, or that would end the line.
    pub(super) fn validate(&self) -> Result<()> {
        check_identifier("fetch-arg name", &self.name, MAX_ARG_NAME_LEN)?;
        if self.name.starts_with("common_") || self.name.starts_with("__probe_") {
            return Err(invalid(
                "fetch-arg name",
                &self.name,
                "names starting with common_ or __probe_ are the event's own fields",
            ));
        }
        let body = format!("{}:{}", self.expr, self.ty.kernel_name());
        if self.expr.is_empty() {
            return Err(invalid("fetch-arg expression", &self.expr, "it is empty"));
        }
        if let Some(c) = super::probe::kernel_split(&self.expr) {
            return Err(invalid(
                "fetch-arg expression",
                &self.expr,
                format!("it contains {c}, which would end the argument or the line"),
            ));
        }
        if body.len() > MAX_ARG_EXPR_LEN {
            return Err(invalid(
                "fetch-arg expression",
                &body,
                format!(
                    "it is {} bytes long; the kernel allows at most {MAX_ARG_EXPR_LEN}",
                    body.len()
                ),
            ));
        }
        Ok(())
    }
}

/// The fetch-arg expression for a location, for a probe whose stack pointer is `sp_above_entry`
/// bytes above the entry stack pointer (0 at entry and on a RET; in a uretprobe 8 on x86-64,
/// 0 on aarch64).
pub fn location_text(at: &ArgLocation, sp_above_entry: u64) -> String {
    match at {
        ArgLocation::Register(r) => format!("%{r}"),
        ArgLocation::EntryStack { offset } => {
            let off = *offset as i128 - sp_above_entry as i128;
            if off < 0 {
                format!("{off}(%sp)")
            } else {
                format!("+{off}(%sp)")
            }
        }
        ArgLocation::ReturnValue => "$retval".into(),
        ArgLocation::Deref { base, offset } => {
            let base = location_text(base, sp_above_entry);
            if *offset < 0 {
                format!("{offset}({base})")
            } else {
                format!("+{offset}({base})")
            }
        }
    }
}

/// One value as a fetch-arg, for a probe of `kind` in an image of `arch`. A raw text that does
/// not parse (the spec parser checks it first) is passed on as an `x64` expression for the
/// kernel to refuse.
pub fn fetcharg(f: &Fetch, kind: ProbeKind, arch: Arch) -> FetchArg {
    let sp = match kind {
        ProbeKind::Entry => 0,
        ProbeKind::UretProbe => ArchConventions::of(arch).sp_after_return,
    };
    match &f.value {
        FetchValue::Int { at, ty } => {
            FetchArg::new(f.field.clone(), location_text(at, sp), (*ty).into())
        }
        FetchValue::CString { at } => {
            FetchArg::new(f.field.clone(), location_text(at, sp), FetchType::String)
        }
        FetchValue::Array { at, elem, len } => FetchArg::new(
            f.field.clone(),
            location_text(at, sp),
            FetchType::Array {
                elem: if elem.bits() == 8 {
                    ArrayElem::U8
                } else {
                    ArrayElem::U16
                },
                len: *len,
            },
        ),
        FetchValue::Comm => FetchArg::new(f.field.clone(), "$comm", FetchType::String),
        FetchValue::Backend { text } => match parse_raw(text) {
            Ok((expr, ty)) => FetchArg::new(f.field.clone(), expr, ty),
            Err(_) => FetchArg::new(f.field.clone(), text.clone(), FetchType::Int(IntType::X64)),
        },
    }
}

/// The fetch-args of a probe, in the plan's order.
pub fn fetchargs(p: &KernelProbe) -> Vec<FetchArg> {
    p.fetches
        .iter()
        .map(|f| fetcharg(f, p.kind, p.arch))
        .collect()
}

/// The kernel type of the value in field `field` of probe `p`.
pub fn field_type(p: &KernelProbe, field: &str) -> Option<FetchType> {
    p.fetches
        .iter()
        .find(|f| f.field == field)
        .map(|f| fetcharg(f, p.kind, p.arch).ty)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{ArgRequest, FunctionPlan, PairingKey, ProbeKind, ProbePlan, Returns, Role};
    use netprobe_core::abi::{CallingConvention, Register, ValueType};
    use netprobe_core::addr::FileOffset;

    /// A System V function `add` at 0x1139 of `/bin/x` returning an `s32`.
    pub(crate) fn c_function(args: Vec<ArgRequest>, returns: Returns) -> FunctionPlan {
        FunctionPlan {
            name: "add".into(),
            image: "/bin/x".into(),
            probe_path: "/bin/x".into(),
            function_offset: FileOffset(0x1139),
            entry_offsets: vec![FileOffset(0x1139)],
            returns,
            convention: CallingConvention::SysV,
            args,
            ret: Some(ValueType::Int(IntType::S32)),
            pairing: PairingKey::Thread,
            symbol: Some("add".into()),
        }
    }

    pub(crate) fn pos(name: &str, ty: ValueType) -> ArgRequest {
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
                pos("a", ValueType::Int(IntType::S32)),
                pos("b", ValueType::Int(IntType::X64)),
                pos("s", ValueType::CString),
            ],
            Returns::UretProbe,
        ))
        .unwrap();
        assert_eq!(plan.probes.len(), 2);
        let e = &plan.probes[0];
        let rendered: Vec<String> = fetchargs(e).iter().map(|a| a.render()).collect();
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
        assert_eq!(fetchargs(r)[0].render(), "ret=$retval:s32");
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
            convention: CallingConvention::GoRegAbi { arch: Arch::X86_64 },
            args: vec![
                pos("a", ValueType::Int(IntType::S64)),
                pos("s", ValueType::GoString),
                pos("b", ValueType::Int(IntType::S64)),
            ],
            ret: Some(ValueType::Int(IntType::S64)),
            pairing: PairingKey::Register(Register::R14),
            symbol: None,
        })
        .unwrap();
        assert_eq!(plan.probes.len(), 3);
        let r: Vec<String> = fetchargs(&plan.probes[0])
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
            assert_eq!(fetchargs(p)[0].render(), "ret=%ax:s64");
        }
    }

    /// Go before 1.17: `func Getenv(key string) string` has a 32-byte in/out area (key: ptr,
    /// len; result: ptr, len), as esbuild 0.8.57 (go1.16) compiles it: the body reads the key at
    /// 0x38/0x40(SP) after `sub rsp, 0x30` and stores the result at 0x48/0x50(SP).
    #[test]
    fn go_stack_abi_reads_arguments_and_results_from_sp() {
        let conv = CallingConvention::GoStackAbi {
            arch: Arch::X86_64,
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
                pos("key", ValueType::GoString),
                pos("n", ValueType::Int(IntType::S64)),
            ],
            ret: Some(ValueType::GoString),
            pairing: PairingKey::Thread,
            symbol: None,
        })
        .unwrap();
        let render = |i: usize| -> Vec<String> {
            fetchargs(&plan.probes[i])
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
        let result = conv.result_words(1).unwrap();
        assert_eq!(location_text(&result[0], 8), "+24(%sp)");
        assert_eq!(location_text(&result[0], 0), "+32(%sp)");
        // Which results can be placed at all is the core's (`abi`'s tests).
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
            convention: CallingConvention::GoRegAbi { arch: Arch::X86_64 },
            args: vec![],
            ret: Some(ValueType::GoString),
            pairing: PairingKey::Register(Register::R14),
            symbol: None,
        })
        .unwrap();
        let p = &plan.probes[0];
        assert_eq!(p.kind, ProbeKind::UretProbe);
        let r: Vec<String> = fetchargs(p).iter().map(|a| a.render()).collect();
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
                    ty: ValueType::Int(IntType::U64),
                })
                .collect::<Vec<_>>()
        };
        let fetches = |plan: &ProbePlan| -> Vec<String> {
            fetchargs(&plan.probes[0])
                .into_iter()
                .map(|a| a.expr)
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
            ty: ValueType::GoString,
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
        go.convention = CallingConvention::GoRegAbi { arch: Arch::X86_64 };
        let mut plan = ProbePlan::new(false);
        plan.add_function(go).unwrap();
        assert_eq!(fetches(&plan)[8..], ["%r11", "+8(%sp)"]);
        // Not at the first byte: the stack offset is unknown, so stack arguments are refused.
        let mut inside = c_function(int(7), Returns::None);
        inside.entry_offsets = vec![FileOffset(inside.function_offset.0 + 4)];
        let e = ProbePlan::new(false).add_function(inside).unwrap_err();
        assert!(e.to_string().contains("first byte"), "{e}");
    }
}

#[cfg(test)]
mod per_arch_tests;
