//! Where the innermost function's return address is at a sampled instruction, when a
//! frame-pointer walk cannot find it.
//!
//! The kernel's user callchain on x86-64 (`perf_callchain_user`, arch/x86/events/core.c) takes
//! the sampled IP, then follows RBP: `[RBP + 8]` is taken as the innermost function's return
//! address. That holds only once the function has made its frame (`push rbp; mov rbp, rsp`).
//! On its first instructions, at its `ret`, and all through a function that makes no frame
//! (a leaf GCC compiles without one), RBP still holds the caller's frame, so `[RBP + 8]` returns
//! into the caller's caller and the caller is missing from the stack (perf's `-g` misses it too).
//! The return address is then on the stack at RSP plus what the function pushed or reserved so
//! far, which this module finds by decoding the function from its first byte up to the sampled
//! instruction.
//!
//! Why a straight-line decode is enough: compilers describe every instruction of a function with
//! one call-frame rule (DWARF CFI, `.eh_frame`; Go: one SP delta per PC in the pcsp table), so the
//! stack depth at an instruction is the same on every path that reaches it, and the fall-through
//! path from the entry is one of them as long as no `ret` or unconditional jump lies before it.

use crate::addr::VirtAddr;
use crate::arch::x86_64::{instructions, writes_register};
use iced_x86::{FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpKind, Register};

/// Where the innermost frame's return address is at a sampled instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnermostFrame {
    /// RBP holds this function's own frame (`mov rbp, rsp` or `lea rbp, [rsp + N]` ran): a
    /// frame-pointer walk finds the caller.
    FramePointer,
    /// RBP does not hold this function's frame: the return address into the caller is the word
    /// at RSP + this many bytes, and a frame-pointer walk skips the caller.
    OnStack(u64),
    /// Not known: the sampled address is not an instruction boundary of the code given, the
    /// path from the entry passes a `ret` or an unconditional jump, an instruction writes RSP or
    /// RBP in a way not modelled (`and rsp, -16`, `mov rbp, rdi`, `leave`...), or a byte does not
    /// decode.
    Unknown,
}

/// Where the return address is when the instruction at `ip` runs, for the function whose first
/// byte is at `entry` and whose bytes from there on are `code` (at least up to the end of the
/// instruction at `ip`).
///
/// Decodes from `entry` to `ip`. Returns [`InnermostFrame::OnStack`]`(0)` when the instruction
/// at `ip` is a `ret` (whatever came before: a `ret` pops the return address at RSP); otherwise [`InnermostFrame::FramePointer`] once the frame is made,
/// [`InnermostFrame::OnStack`] with the bytes pushed (`push`) or reserved (`sub rsp, N`) so far
/// when `ip` is reached without it, and [`InnermostFrame::Unknown`] in every case listed there.
pub fn innermost_frame(code: &[u8], entry: VirtAddr, ip: VirtAddr) -> InnermostFrame {
    let mut factory = InstructionInfoFactory::new();
    // What the instructions decoded so far did: `Some(OnStack(depth))` while modelled,
    // `Some(FramePointer)` once the frame is made, `None` once lost. Decoding goes on to `ip`
    // either way, so an address inside an instruction is always refused.
    let mut state = Some(InnermostFrame::OnStack(0));
    for instr in instructions(code, entry) {
        if instr.ip() == ip.0 {
            if !instr.is_invalid() && instr.mnemonic() == Mnemonic::Ret {
                return InnermostFrame::OnStack(0);
            }
            return state.unwrap_or(InnermostFrame::Unknown);
        }
        if instr.ip() > ip.0 {
            break;
        }
        if let Some(InnermostFrame::OnStack(depth)) = state {
            state = if instr.is_invalid() {
                None
            } else {
                match step(&instr, &mut factory) {
                    Step::Frame => Some(InnermostFrame::FramePointer),
                    Step::Stack(delta) => {
                        depth.checked_add_signed(delta).map(InnermostFrame::OnStack)
                    }
                    Step::Lost => None,
                }
            };
        }
    }
    InnermostFrame::Unknown
}

/// Whether the instruction at the start of `code` is a near `ret` (`C3`, `C2 iw`, with any
/// prefixes such as `rep ret`), which pops the return address at RSP. `false` when it is
/// anything else or does not decode.
pub fn returns_at(code: &[u8]) -> bool {
    instructions(code, VirtAddr(0))
        .next()
        .is_some_and(|i| !i.is_invalid() && i.mnemonic() == Mnemonic::Ret)
}

/// What one instruction on the way to the sampled one does to the frame.
enum Step {
    /// Makes RBP this function's frame pointer.
    Frame,
    /// Moves RSP down by this many bytes (negative: up) and leaves RBP alone.
    Stack(i64),
    /// Control does not fall through, or RSP/RBP change in a way not modelled.
    Lost,
}

fn step(instr: &Instruction, factory: &mut InstructionInfoFactory) -> Step {
    match instr.flow_control() {
        FlowControl::Next | FlowControl::ConditionalBranch => {}
        // A call returns with RSP where it was (the callee pops the return address).
        FlowControl::Call | FlowControl::IndirectCall => return Step::Stack(0),
        _ => return Step::Lost,
    }
    let reg = |n: u32| (instr.op_kind(n) == OpKind::Register).then(|| instr.op_register(n));
    let rsp_based_memory = instr.op_count() == 2
        && instr.op_kind(1) == OpKind::Memory
        && instr.memory_base() == Register::RSP
        && instr.memory_index() == Register::None;
    match instr.mnemonic() {
        // mov rbp, rsp: the frame of GCC, Clang, Go >= 1.21 (after `push rbp`) and RyuJIT.
        Mnemonic::Mov if reg(0) == Some(Register::RBP) && reg(1) == Some(Register::RSP) => {
            return Step::Frame
        }
        // lea rbp, [rsp + N]: Go before 1.21 (`sub rsp, N; mov [rsp+N-8], rbp`) and RyuJIT
        // frames with a locals area.
        Mnemonic::Lea if reg(0) == Some(Register::RBP) && rsp_based_memory => return Step::Frame,
        // sub/add rsp, imm: a fixed-size frame reserved or released.
        Mnemonic::Sub | Mnemonic::Add if reg(0) == Some(Register::RSP) => {
            let Some(imm) = immediate(instr) else {
                return Step::Lost;
            };
            return Step::Stack(if instr.mnemonic() == Mnemonic::Sub {
                imm
            } else {
                -imm
            });
        }
        // lea rsp, [rsp + N]
        Mnemonic::Lea if reg(0) == Some(Register::RSP) && rsp_based_memory => {
            return Step::Stack(-instr.memory_displacement64().cast_signed());
        }
        _ => {}
    }
    let info = factory.info(instr);
    let writes = |which: Register| writes_register(info, which);
    if writes(Register::RBP) {
        return Step::Lost;
    }
    // push/pop of a register, an immediate or memory: RSP moves by the operand's size.
    let implicit = i64::from(instr.stack_pointer_increment());
    if implicit != 0 && matches!(instr.mnemonic(), Mnemonic::Push | Mnemonic::Pop) {
        return Step::Stack(-implicit);
    }
    if writes(Register::RSP) {
        return Step::Lost;
    }
    Step::Stack(0)
}

/// The immediate second operand of `sub/add rsp, imm` as a non-negative count of bytes.
fn immediate(instr: &Instruction) -> Option<i64> {
    match instr.op_kind(1) {
        OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate8 => {
            Some(instr.immediate(1).cast_signed())
        }
        _ => None,
    }
    .filter(|v| (0..=1 << 20).contains(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENTRY: u64 = 0x1000;

    /// The answer at every instruction boundary of `code` (assembled by hand below, each
    /// instruction's bytes checked with `objdump -D -b binary -mi386:x86-64`).
    fn at_each(code: &[u8]) -> Vec<(u64, InnermostFrame)> {
        instructions(code, VirtAddr(ENTRY))
            .map(|i| {
                (
                    i.ip() - ENTRY,
                    innermost_frame(code, VirtAddr(ENTRY), VirtAddr(i.ip())),
                )
            })
            .collect()
    }

    use InnermostFrame::{FramePointer as Fp, OnStack, Unknown};

    #[test]
    fn gcc_frame_with_endbr64() {
        // endbr64; push rbp; mov rbp,rsp; mov eax,edi; pop rbp; ret
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x89, 0xf8, 0x5d, 0xc3,
        ];
        assert_eq!(
            at_each(&code),
            [
                (0, OnStack(0)),
                (4, OnStack(0)),
                (5, OnStack(8)),
                (8, Fp),
                (10, Fp),
                (11, OnStack(0)),
            ]
        );
    }

    #[test]
    fn go_register_abi_frame_after_the_stack_check() {
        // cmp rsp,[r14+0x10]; jbe +0x1a; push rbp; mov rbp,rsp; sub rsp,0x10; call rel32;
        // add rsp,0x10; pop rbp; ret
        let code = [
            0x49, 0x3b, 0x66, 0x10, 0x76, 0x1a, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10,
            0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x10, 0x5d, 0xc3,
        ];
        assert_eq!(
            at_each(&code),
            [
                (0, OnStack(0)),
                (4, OnStack(0)),
                (6, OnStack(0)),
                (7, OnStack(8)),
                (10, Fp),
                (14, Fp),
                (19, Fp),
                (23, Fp),
                (24, OnStack(0)),
            ]
        );
    }

    #[test]
    fn go_frame_before_1_21_saves_rbp_inside_the_reserved_area() {
        // sub rsp,0x18; mov [rsp+0x10],rbp; lea rbp,[rsp+0x10]; nop
        let code = [
            0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x48, 0x8d, 0x6c, 0x24, 0x10,
            0x90,
        ];
        assert_eq!(
            at_each(&code),
            [
                (0, OnStack(0)),
                (4, OnStack(0x18)),
                (9, OnStack(0x18)),
                (14, Fp)
            ]
        );
    }

    #[test]
    fn a_leaf_without_a_frame_keeps_its_return_address_at_rsp() {
        // push rbx; mov rbx,rdi; imul rbx,rbx; mov rax,rbx; pop rbx; ret
        let code = [
            0x53, 0x48, 0x89, 0xfb, 0x48, 0x0f, 0xaf, 0xdb, 0x48, 0x89, 0xd8, 0x5b, 0xc3,
        ];
        assert_eq!(
            at_each(&code),
            [
                (0, OnStack(0)),
                (1, OnStack(8)),
                (4, OnStack(8)),
                (8, OnStack(8)),
                (11, OnStack(8)),
                (12, OnStack(0)),
            ]
        );
    }

    #[test]
    fn what_is_not_modelled_is_unknown() {
        // test edi,edi; je +1; ret; push rbp; mov rbp,rsp: past an early ret
        let early_ret = [0x85, 0xff, 0x74, 0x01, 0xc3, 0x55, 0x48, 0x89, 0xe5];
        assert_eq!(
            innermost_frame(&early_ret, VirtAddr(ENTRY), VirtAddr(ENTRY + 5)),
            Unknown
        );
        // push rbp; mov rbp,rdi (rbp as a general register)
        let rbp_data = [0x55, 0x48, 0x89, 0xfd, 0x90];
        assert_eq!(
            innermost_frame(&rbp_data, VirtAddr(ENTRY), VirtAddr(ENTRY + 4)),
            Unknown
        );
        // and rsp,-16 (an aligned frame: its size is not known statically)
        let aligned = [0x48, 0x83, 0xe4, 0xf0, 0x90];
        assert_eq!(
            innermost_frame(&aligned, VirtAddr(ENTRY), VirtAddr(ENTRY + 4)),
            Unknown
        );
        // pop before any push: the depth would be negative
        let pop_first = [0x5b, 0x90];
        assert_eq!(
            innermost_frame(&pop_first, VirtAddr(ENTRY), VirtAddr(ENTRY + 1)),
            Unknown
        );
        // inside an instruction, before the entry, past the code
        let gcc = [0x55, 0x48, 0x89, 0xe5];
        for ip in [ENTRY + 2, ENTRY - 1, ENTRY + 4] {
            assert_eq!(
                innermost_frame(&gcc, VirtAddr(ENTRY), VirtAddr(ip)),
                Unknown
            );
        }
        assert!(returns_at(&[0xc2, 0x08, 0x00]));
        assert!(returns_at(&[0xf3, 0xc3]));
        assert!(!returns_at(&[0xcb]));
        assert!(!returns_at(&[]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes, any address: an answer, never a panic; a depth on the stack is at most
        /// what the instructions before `ip` could have pushed or reserved.
        #[test]
        fn hostile_code_gives_an_answer(
            code in proptest::collection::vec(any::<u8>(), 0..64),
            ip in 0u64..80,
        ) {
            match innermost_frame(&code, VirtAddr(ENTRY), VirtAddr(ENTRY + ip)) {
                OnStack(d) => prop_assert!(d <= (ip + 1) * (1 << 20)),
                Fp | Unknown => {}
            }
        }

        /// Prepending pushes of registers other than RBP to a frameless body moves the return
        /// address 8 bytes per push.
        #[test]
        fn each_push_moves_the_return_address(pushes in 0usize..10) {
            let mut code: Vec<u8> = std::iter::repeat_n(0x53, pushes).collect(); // push rbx
            code.extend([0x48, 0x89, 0xf8, 0xc3]); // mov rax,rdi; ret
            let ip = VirtAddr(ENTRY + pushes as u64);
            prop_assert_eq!(
                innermost_frame(&code, VirtAddr(ENTRY), ip),
                OnStack(8 * pushes as u64)
            );
        }
    }
}
