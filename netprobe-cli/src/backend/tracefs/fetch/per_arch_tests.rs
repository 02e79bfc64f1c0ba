//! The fetch-args of each architecture's conventions, as the kernel's uprobe_events reads them:
//! snapshots of whole plans per architecture and ABI, and the invariant that an aarch64 plan
//! names only aarch64 registers (`x0` .. `x30`, `sp`; kernel `arch/arm64/kernel/ptrace.c`,
//! `regoffset_table`) and an x86-64 plan only x86-64 ones.

use super::fetchargs;
use crate::plan::{ArgRequest, FunctionPlan, PairingKey, ProbePlan, Returns};
use netprobe_core::abi::{CallingConvention, IntType, Register, ValueType};
use netprobe_core::addr::FileOffset;
use netprobe_core::arch::Arch;
use proptest::prelude::*;

fn positional(types: &[ValueType]) -> Vec<ArgRequest> {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| ArgRequest::Positional {
            name: Some(format!("a{i}")),
            ty: *ty,
        })
        .collect()
}

/// A function at 0x1000 with RET probes at 0x1040 (Go, .NET) or a uretprobe (C).
fn function(convention: CallingConvention, args: &[ValueType], ret: ValueType) -> FunctionPlan {
    let returns = if convention.is_native() {
        Returns::UretProbe
    } else {
        Returns::Instructions(vec![FileOffset(0x1040)])
    };
    let pairing = match convention {
        CallingConvention::GoRegAbi { .. } => {
            PairingKey::Register(convention.conventions().go_goroutine)
        }
        _ => PairingKey::Thread,
    };
    FunctionPlan {
        name: "f".into(),
        image: "/bin/app".into(),
        probe_path: "/bin/app".into(),
        function_offset: FileOffset(0x1000),
        entry_offsets: vec![FileOffset(0x1000)],
        returns,
        convention,
        args: positional(args),
        ret: Some(ret),
        pairing,
        symbol: Some("f".into()),
    }
}

/// Every probe of the plan as `KIND@OFFSET fetch-args`.
fn rendered(f: FunctionPlan, user_stacks: bool) -> String {
    let mut plan = ProbePlan::new(false);
    plan.add_function(f).unwrap();
    if user_stacks {
        plan.record_user_stacks();
    }
    plan.probes
        .iter()
        .map(|p| {
            let args: Vec<String> = fetchargs(p).iter().map(|a| a.render()).collect();
            format!("{:?} {:?}@{}: {}", p.role, p.kind, p.offset, args.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const S64: ValueType = ValueType::Int(IntType::S64);
const S32: ValueType = ValueType::Int(IntType::S32);

/// Ten C integer arguments and a string: eight in x0..x7, the rest from `[sp]` on (AAPCS64
/// has no return address on the stack); the result from `$retval` (x0), read after the return
/// at the entry's stack pointer. The same on x86-64 for comparison.
#[test]
fn c_arguments_per_architecture() {
    let mut args = vec![S32; 9];
    args.insert(1, ValueType::CString);
    let out: Vec<String> = [Arch::X86_64, Arch::Aarch64]
        .into_iter()
        .map(|arch| {
            format!(
                "{arch}:\n{}",
                rendered(function(CallingConvention::native(arch), &args, S64), true)
            )
        })
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

/// Go's register ABI: arm64 R0..R15 (a string is two words), the goroutine in R28, results
/// from R0 at the RET; amd64 for comparison. Seventeen words overflow arm64's sixteen.
#[test]
fn go_register_abi_per_architecture() {
    let mut args = vec![ValueType::GoString];
    args.extend(vec![S64; 15]);
    let out: Vec<String> = [Arch::X86_64, Arch::Aarch64]
        .into_iter()
        .map(|arch| {
            format!(
                "{arch}:\n{}",
                rendered(
                    function(
                        CallingConvention::GoRegAbi { arch },
                        &args,
                        ValueType::GoString
                    ),
                    true
                )
            )
        })
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

/// Go's stack ABI (before Go 1.18 on arm64): words from `8(RSP)` on both, results after the
/// arguments in the in/out area.
#[test]
fn go_stack_abi_per_architecture() {
    let out: Vec<String> = [Arch::X86_64, Arch::Aarch64]
        .into_iter()
        .map(|arch| {
            let conv = CallingConvention::GoStackAbi {
                arch,
                args_size: Some(32),
            };
            format!(
                "{arch}:\n{}",
                rendered(function(conv, &[ValueType::GoString, S64], S64), false)
            )
        })
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

/// The register names a fetch-arg expression uses (`%x0`, `+8(%sp)` → `x0`, `sp`).
fn register_names(expr: &str) -> Vec<&str> {
    expr.split('%')
        .skip(1)
        .map(|rest| {
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

fn value_type() -> impl Strategy<Value = ValueType> {
    prop_oneof![
        prop::sample::select(IntType::ALL.to_vec()).prop_map(ValueType::Int),
        Just(ValueType::CString),
        Just(ValueType::DotnetString),
        Just(ValueType::GoString),
    ]
}

fn convention() -> impl Strategy<Value = CallingConvention> {
    let arch = prop::sample::select(vec![Arch::X86_64, Arch::Aarch64]);
    (arch, 0..3u8, prop::option::of(0..256u32)).prop_map(|(arch, kind, args_size)| match kind {
        0 => CallingConvention::native(arch),
        1 => CallingConvention::GoRegAbi { arch },
        _ => CallingConvention::GoStackAbi {
            arch,
            args_size: args_size.map(|s| s * 8),
        },
    })
}

proptest! {
    /// Every location of every plan is a register of the image's architecture or a stack
    /// slot: no x86 name ever appears in an aarch64 plan, nor an aarch64 one in an x86 plan.
    #[test]
    fn every_fetch_names_a_register_of_its_architecture(
        conv in convention(),
        args in prop::collection::vec(value_type(), 0..20),
        ret in value_type(),
        stacks in any::<bool>(),
    ) {
        let arch = conv.arch();
        let mut plan = ProbePlan::new(true);
        if plan.add_function(function(conv, &args, ret)).is_err() {
            // A result the stack ABI cannot place is refused; nothing to check.
            return Ok(());
        }
        if stacks {
            plan.record_user_stacks();
        }
        for p in &plan.probes {
            prop_assert_eq!(p.arch, arch);
            for a in fetchargs(p) {
                for name in register_names(&a.expr) {
                    let r = Register::parse_for(arch, name);
                    prop_assert!(
                        r.is_some_and(|r| r.is_of(arch)),
                        "{} names {} in an {} plan", a.render(), name, arch
                    );
                }
            }
        }
    }
}
