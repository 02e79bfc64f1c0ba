//! The cheapest equivalent entry probe point of a function.
//!
//! A uprobe replaces an instruction's first byte with INT3. When it fires, the kernel either
//! *emulates* the original instruction in the trap handler (cheap) or *single-steps* a copy of it
//! out of line (a second trap: about ten times the cost). Linux `arch/x86/kernel/uprobes.c`,
//! `arch_uprobe_analyze_insn`: `branch_setup_xol_ops` emulates NOPs (`insn_is_nop`), `jmp rel8`,
//! `jmp rel32`, `call rel32` and conditional jumps (refusing any with a `0x66` prefix), and
//! `push_setup_xol_ops` emulates `push r64` (opcodes `50`-`57`, alone or with the single REX
//! prefix `41`); everything else goes to `default_xol_ops`, i.e. is single-stepped.
//! `uprobe_init_insn` refuses instructions with an `es`/`cs`/`ss`/`ds` segment or `lock` prefix
//! outright (`is_prefix_bad`), so a `cs nopw` is no probe point at all. Measured on this project's
//! machines (Linux 6.18): emulated ~1-2 µs a hit, a 5-byte NOP ~0.95 µs (the kernel's optimized
//! uprobe, `can_optimize`), single-stepped 10-16 µs.
//!
//! [`cheapest_entry`] moves an entry probe from a single-stepped first instruction to the first
//! instruction the kernel emulates in the straight-line run that follows, when the move cannot
//! change what the probe observes. Each rule below names the case that motivated it (the style of
//! cilium/ebpf's `link/uprobe.go`, which documents each adjustment of a uprobe offset):
//!
//! 1. **No branch into the run.** The whole function is decoded; if any direct branch or call
//!    lands on an instruction after the entry up to and including the chosen one, the moved probe
//!    would fire on that path too (a loop whose head is the second instruction would count every
//!    iteration instead of every call): keep the entry. ([`Kept::BranchTarget`]) The same holds
//!    for branches from elsewhere in the file ([`recheck_branches_from_file`]): glibc's `mempcpy`
//!    ends with a jump to `memcpy+0x3`, so a probe moved past it would count `mempcpy` calls.
//!    ([`Kept::BranchFromOutside`])
//! 2. **No indirect jump, nothing undecodable** anywhere in the function: a `jmp rax` through a
//!    jump table may land anywhere, and bytes that do not decode cannot be shown not to be a
//!    branch. ([`Kept::IndirectJump`], [`Kept::Undecodable`])
//! 3. **Only harmless instructions are skipped**, from an allow-list: `endbr64`/`endbr32`, NOPs,
//!    and register-only `mov`/`movzx`/`movsx`/`movsxd`/`lea`/`xor`/`add`/`sub`/`and`/`or`/`cmp`/
//!    `test`/`inc`/`dec`/`neg`/`not`/`imul`/shifts with general-purpose register or immediate
//!    operands. Anything touching memory (`mov [rsp+8], rbx`: a store, or a load that may fault
//!    before the probe fires), calling (`call`: the callee's effects and a hit order change),
//!    branching, dividing (`div` may trap) or using other register files ends the run.
//!    ([`Kept::NotSkippable`])
//! 4. **Skipped instructions write neither a register the probe fetches nor RSP nor RBP.**
//!    `mov rdi, [rdi]` before the probe changes the first argument it would read; `sub rsp, 0x18`
//!    (Go 1.19's frame setup) moves every `+N(%sp)` stack argument and the return address the
//!    stack walk reads at the top of the stack; `mov rbp, rsp` changes the frame the kernel's
//!    frame-pointer walk starts from. A `push` as the chosen instruction is fine: the probe fires
//!    before it executes. ([`Kept::WritesFetched`], [`Kept::WritesStackOrFrame`])
//! 5. **A first instruction that is already cheap stays** ([`Kept::AlreadyCheap`]); so does one
//!    the kernel refuses (nothing netprobe moves can make it placeable).
//!
//! The caller supplies the whole function's bytes as the file's tables bound it (the probe-safety
//! gate's tables: ELF symbol size, Go pclntab code size) and the registers the probe fetches.
//! Offsets are byte indices into those bytes. Never panics on arbitrary bytes.
//!
//! One concept per file: `walk.rs` (the rules applied, the same for every architecture),
//! `x86_64.rs` and `aarch64.rs` (each architecture's instructions as the rules see them; the
//! kernel simulates far fewer on aarch64), `skippable.rs` (the x86-64 instructions a probe may
//! move past: rules 3 and 4), `decision.rs` (the decision and why), `crate::arch`'s
//! `uprobe_handling.rs` per architecture (what the kernel does with a uprobe on an
//! instruction), this file (the rules, and the dispatch by the image's architecture).

mod aarch64;
mod decision;
mod skippable;
mod walk;
mod x86_64;

pub use crate::arch::KernelHandling;
pub use decision::{EntryChoice, Kept, PointInstruction};

use crate::abi::Register;
use crate::arch::Arch;

/// What the probe reads, in the terms the rules need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchedState {
    /// Every register a fetch reads, directly or as a base of a memory read.
    pub registers: Vec<Register>,
    /// Something the rules cannot see into (a raw fetch-arg): keep the entry.
    pub opaque: bool,
}

/// Rule 1 across the file: `choice` (for a function whose first byte is at file offset
/// `function_start`) is undone when a branch of the file's code (`(target, source)` file offsets
/// sorted by target, from [`crate::probe_safety::CodeFile::direct_branch_targets`]) lands in the
/// run after the planned point, up to and including the chosen one. (The file's branches include
/// the function's own, which [`cheapest_entry`] has already ruled out there.)
pub fn recheck_branches_from_file(
    choice: EntryChoice,
    function_start: u64,
    targets: &[(crate::addr::FileOffset, crate::addr::FileOffset)],
) -> EntryChoice {
    if !choice.moved() {
        return choice;
    }
    let lo = function_start.saturating_add(choice.planned.offset);
    let hi = function_start.saturating_add(choice.chosen.offset);
    let first = targets.partition_point(|(t, _)| t.0 <= lo);
    match targets.get(first).filter(|(t, _)| t.0 <= hi) {
        Some(&(t, from)) => EntryChoice {
            chosen: choice.planned.clone(),
            kept: Some(Kept::BranchFromOutside {
                target: t.0 - function_start,
                from_file_offset: from.0,
            }),
            planned: choice.planned,
        },
        None => choice,
    }
}

/// How the kernel handles a uprobe on the instruction `bytes` start with, by the rules of the
/// host, where live probes go (x86-64 on any other host: netprobe refuses live probes there).
pub fn handling_of(bytes: &[u8]) -> KernelHandling {
    Arch::host().unwrap_or(Arch::X86_64).handling_of(bytes)
}

/// The cheapest entry probe point equivalent to one at `entry` (a byte index into `code`, the
/// whole function from its first byte, of architecture `arch`) for a probe that reads `fetched`
/// (the rules are in the module documentation; aarch64's in `aarch64.rs`). Always returns an
/// instruction boundary of `code` at or after `entry` that no branch of the function targets
/// (other than `entry` itself).
pub fn cheapest_entry(arch: Arch, code: &[u8], entry: u64, fetched: &FetchedState) -> EntryChoice {
    match arch {
        Arch::X86_64 => x86_64::cheapest_entry(code, entry, fetched),
        Arch::Aarch64 => aarch64::cheapest_entry(code, entry, fetched),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::VirtAddr;
    use crate::arch::x86_64 as x86;
    use iced_x86::OpKind;
    use proptest::prelude::*;

    fn none() -> FetchedState {
        FetchedState::default()
    }

    fn regs(r: &[Register]) -> FetchedState {
        FetchedState {
            registers: r.to_vec(),
            opaque: false,
        }
    }

    // mov rax, rdi; push rbx; add rax, rsi; pop rbx; ret
    const MOV_THEN_PUSH: &[u8] = &[0x48, 0x89, 0xf8, 0x53, 0x48, 0x01, 0xf0, 0x5b, 0xc3];

    #[test]
    fn moves_past_a_register_move_to_a_push() {
        let c = cheapest_entry(
            Arch::X86_64,
            MOV_THEN_PUSH,
            0,
            &regs(&[Register::Di, Register::Si]),
        );
        assert_eq!(c.kept, None);
        assert_eq!(c.chosen.offset, 3);
        assert_eq!(c.chosen.text, "push rbx");
        assert_eq!(c.chosen.handling, KernelHandling::Emulated);
        assert_eq!(c.planned.mnemonic, "mov");
        assert_eq!(c.planned.handling, KernelHandling::SingleStepped);
        assert_eq!(c.chosen.describe(), "+0x3 (push, emulated: ~1.5 µs/hit)");
    }

    #[test]
    fn endbr64_then_push_rbp_moves() {
        // endbr64; push rbp; mov rbp, rsp; pop rbp; ret
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &regs(&[Register::Di]));
        assert_eq!(c.chosen.offset, 4);
        assert_eq!(c.planned.mnemonic, "endbr64");
    }

    #[test]
    fn a_write_to_a_fetched_register_keeps_the_entry() {
        // lea rdi, [rdi+1]; push rbx; pop rbx; ret
        let code = [0x48, 0x8d, 0x7f, 0x01, 0x53, 0x5b, 0xc3];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &regs(&[Register::Di]));
        assert_eq!(
            c.kept,
            Some(Kept::WritesFetched {
                at: 0,
                register: Register::Di
            })
        );
        assert_eq!(c.chosen.offset, 0);
        // Nobody reads rdi: the move is fine.
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none())
                .chosen
                .offset,
            4
        );
        // A 32-bit write (`mov edi, 5`) writes the whole rdi.
        let code32 = [0xbf, 0x05, 0, 0, 0, 0x53, 0x5b, 0xc3];
        assert!(matches!(
            cheapest_entry(Arch::X86_64, &code32, 0, &regs(&[Register::Di])).kept,
            Some(Kept::WritesFetched { .. })
        ));
    }

    #[test]
    fn a_stack_pointer_write_keeps_the_entry() {
        // sub rsp, 8; push rbx; pop rbx; add rsp, 8; ret
        let code = [
            0x48, 0x83, 0xec, 0x08, 0x53, 0x5b, 0x48, 0x83, 0xc4, 0x08, 0xc3,
        ];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &none());
        assert_eq!(c.kept, Some(Kept::WritesStackOrFrame { at: 0 }));
        // mov rbp, rsp: the frame pointer.
        let code = [0x48, 0x89, 0xe5, 0x53, 0x5b, 0xc3];
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none()).kept,
            Some(Kept::WritesStackOrFrame { at: 0 })
        );
    }

    #[test]
    fn memory_writes_and_calls_are_not_skipped() {
        // mov [rsp+8], rbx; push rbx; pop rbx; ret
        let store = [0x48, 0x89, 0x5c, 0x24, 0x08, 0x53, 0x5b, 0xc3];
        assert!(matches!(
            cheapest_entry(Arch::X86_64, &store, 0, &none()).kept,
            Some(Kept::EntryNotSkippable { .. })
        ));
        // xor eax, eax; mov rax, [rdi]: a load may fault before the probe fires.
        let load = [0x31, 0xc0, 0x48, 0x8b, 0x07, 0x53, 0x5b, 0xc3];
        assert!(matches!(
            cheapest_entry(Arch::X86_64, &load, 0, &none()).kept,
            Some(Kept::NotSkippable { at: Some(2), .. })
        ));
        // xor eax, eax; div ecx; push rbx: div may trap.
        let div = [0x31, 0xc0, 0xf7, 0xf1, 0x53, 0x5b, 0xc3];
        assert!(matches!(
            cheapest_entry(Arch::X86_64, &div, 0, &none()).kept,
            Some(Kept::NotSkippable { at: Some(2), .. })
        ));
    }

    #[test]
    fn a_call_can_be_the_chosen_point_but_is_never_skipped() {
        // xor eax, eax; call +0; ret
        let code = [0x31, 0xc0, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &none());
        assert_eq!(c.chosen.offset, 2);
        assert_eq!(c.chosen.mnemonic, "call");
    }

    #[test]
    fn a_loop_head_in_the_run_keeps_the_first_byte() {
        // +0 mov ecx, esi; +2 xor eax, eax; +4 .L: nop; +5 add rax, rdi; +8 dec ecx;
        // +a jnz .L; +c ret
        let code = [
            0x89, 0xf1, 0x31, 0xc0, 0x90, 0x48, 0x01, 0xf8, 0xff, 0xc9, 0x75, 0xf8, 0xc3,
        ];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &regs(&[Register::Di, Register::Si]));
        assert_eq!(
            c.kept,
            Some(Kept::BranchTarget {
                target: 4,
                from: 10
            })
        );
        assert_eq!(c.chosen.offset, 0);
    }

    #[test]
    fn a_branch_to_a_skipped_instruction_keeps_the_entry() {
        // +0 xor eax, eax; +2 inc eax; +4 push rbx; +5 pop rbx; +6 cmp eax, 3; +9 jl +2; +b ret
        let code = [
            0x31, 0xc0, 0xff, 0xc0, 0x53, 0x5b, 0x83, 0xf8, 0x03, 0x7c, 0xf7, 0xc3,
        ];
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none()).kept,
            Some(Kept::BranchTarget { target: 2, from: 9 })
        );
    }

    #[test]
    fn a_loop_to_the_entry_itself_still_moves() {
        // Every path into the run passes the entry and the moved point once each.
        // +0 xor ecx, ecx; +2 push rbx; +3 pop rbx; +4 dec edi; +6 jnz +0; +8 ret
        let code = [0x31, 0xc9, 0x53, 0x5b, 0xff, 0xcf, 0x75, 0xf8, 0xc3];
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none())
                .chosen
                .offset,
            2
        );
    }

    #[test]
    fn an_indirect_jump_anywhere_keeps_the_entry() {
        // mov rax, rdi; push rbx; pop rbx; jmp rax
        let code = [0x48, 0x89, 0xf8, 0x53, 0x5b, 0xff, 0xe0];
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none()).kept,
            Some(Kept::IndirectJump { at: 5 })
        );
    }

    #[test]
    fn undecodable_bytes_keep_the_entry() {
        // mov rax, rdi; push rbx; then a cut-off mov eax, imm32
        let code = [0x48, 0x89, 0xf8, 0x53, 0xb8, 0x01];
        assert_eq!(
            cheapest_entry(Arch::X86_64, &code, 0, &none()).kept,
            Some(Kept::Undecodable { at: 4 })
        );
    }

    #[test]
    fn cheap_or_refused_entries_stay() {
        // push rbp; ret
        assert_eq!(
            cheapest_entry(Arch::X86_64, &[0x55, 0xc3], 0, &none()).kept,
            Some(Kept::AlreadyCheap)
        );
        // 5-byte nop: optimized.
        let c = cheapest_entry(
            Arch::X86_64,
            &[0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3],
            0,
            &none(),
        );
        assert_eq!(c.planned.handling, KernelHandling::Optimized);
        assert_eq!(c.kept, Some(Kept::AlreadyCheap));
    }

    #[test]
    fn a_prefixed_nop_is_skipped_but_never_chosen() {
        // mov eax, edi; cs nop word [rax+rax]; push rbx; pop rbx; ret
        let code = [
            0x89, 0xf8, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x53, 0x5b,
            0xc3,
        ];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &none());
        assert_eq!(c.chosen.offset, 12);
        let decoded: Vec<_> = x86::instructions(&code, VirtAddr(0)).collect();
        assert_eq!(
            x86::kernel_handling(&decoded[1], &code[2..]),
            KernelHandling::Refused
        );
    }
    #[test]
    fn go_style_entry_after_the_prologue() {
        // main.Fib of Go 1.19: xor ecx, ecx; mov edx, 1; xor ebx, ebx; jmp +0xd; ...
        let code = [
            0x31, 0xc9, 0xba, 0x01, 0x00, 0x00, 0x00, 0x31, 0xdb, 0xeb, 0x0d, 0x48, 0xff, 0xc1,
            0x48, 0x8d, 0x34, 0x13, 0x48, 0x89, 0xd3, 0x48, 0x89, 0xf2, 0x48, 0x39, 0xc1, 0x7c,
            0xee, 0x48, 0x89, 0xd8, 0xc3,
        ];
        let c = cheapest_entry(Arch::X86_64, &code, 0, &regs(&[Register::Ax]));
        assert_eq!(c.chosen.offset, 9);
        assert_eq!(c.chosen.mnemonic, "jmp");
        // A probe reading the second argument register (bx) must not skip `xor ebx, ebx`.
        assert!(matches!(
            cheapest_entry(Arch::X86_64, &code, 0, &regs(&[Register::Bx])).kept,
            Some(Kept::WritesFetched { at: 7, .. })
        ));
    }

    #[test]
    fn a_branch_from_another_function_into_the_run_undoes_the_move() {
        use crate::addr::FileOffset;
        let c = cheapest_entry(Arch::X86_64, MOV_THEN_PUSH, 0, &none());
        assert_eq!(c.chosen.offset, 3);
        // The function starts at file offset 0x1000; another function jumps to 0x1003.
        let targets = [(FileOffset(0x1003), FileOffset(0x2000))];
        let back = recheck_branches_from_file(c.clone(), 0x1000, &targets);
        assert_eq!(back.chosen.offset, 0);
        assert_eq!(
            back.kept,
            Some(Kept::BranchFromOutside {
                target: 3,
                from_file_offset: 0x2000
            })
        );
        // Calls to the function's first byte, or jumps past the chosen point, change nothing.
        let harmless = [
            (FileOffset(0x1000), FileOffset(0x2000)),
            (FileOffset(0x1004), FileOffset(0x2000)),
        ];
        assert_eq!(recheck_branches_from_file(c.clone(), 0x1000, &harmless), c);
    }

    proptest! {
        #[test]
        fn choice_is_a_boundary_inside_and_never_past_a_branch_target(
            code in proptest::collection::vec(any::<u8>(), 0..96),
            pick in 0usize..32,
            fetch in proptest::collection::vec(0usize..16, 0..4),
        ) {
            let boundaries: Vec<u64> = x86::instructions(&code, VirtAddr(0)).map(|i| i.ip()).collect();
            let entry = boundaries.get(pick % boundaries.len().max(1)).copied().unwrap_or(0);
            let fetched = regs(&fetch.iter().map(|&i| Register::X86_64[i]).collect::<Vec<_>>());
            let c = cheapest_entry(Arch::X86_64, &code, entry, &fetched);
            prop_assert!(c.chosen.offset >= entry);
            if c.moved() {
                prop_assert!(c.kept.is_none());
                prop_assert!(boundaries.contains(&c.chosen.offset));
                prop_assert!((c.chosen.offset as usize) < code.len());
                prop_assert!(matches!(c.chosen.handling, KernelHandling::Emulated | KernelHandling::Optimized));
                // No branch of the function lands in (entry, chosen].
                for i in x86::instructions(&code, VirtAddr(0)) {
                    if matches!(i.op0_kind(), OpKind::NearBranch64) {
                        let t = i.near_branch_target();
                        prop_assert!(!(t > entry && t <= c.chosen.offset));
                    }
                }
            } else {
                prop_assert!(c.kept.is_some());
            }
        }
    }
}
