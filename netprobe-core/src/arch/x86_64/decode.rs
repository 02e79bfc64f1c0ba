//! x86-64 code facts that probe placement needs, decoded with iced-x86: one function's RETs and
//! tail jumps, its instruction boundaries, whether it writes RSP before a point.
//!
//! Linear sweep over exactly one function's bytes `[entry, entry + code.len())`. That is sound for
//! compiler output that keeps no data inside functions (Go on amd64 puts jump tables in
//! `.rodata`; GCC/Clang do too) as long as the range ends where the code ends: callers pass the
//! function's *code* length (for Go, from the pcsp table), not the distance to the next
//! function, whose tail is alignment padding (INT3 for Go, NOPs or zeros elsewhere). Bytes that do
//! not decode are counted and stepped over; nothing here can panic on arbitrary bytes.

use crate::addr::VirtAddr;
use crate::arch::{Boundary, CodeScan};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};

/// Decodes `code` (the bytes of one function whose first byte is at `entry`) and lists its RETs
/// and tail jumps. Every address reported lies in `[entry, entry + code.len())` with the whole
/// instruction inside it.
pub fn scan(code: &[u8], entry: VirtAddr) -> CodeScan {
    let end = entry.0.saturating_add(code.len() as u64);
    let mut out = CodeScan::default();
    for instr in instructions(code, entry) {
        if instr.is_invalid() {
            out.invalid += 1;
            continue;
        }
        match instr.mnemonic() {
            Mnemonic::Ret => out.rets.push(VirtAddr(instr.ip())),
            Mnemonic::Jmp if instr.flow_control() == FlowControl::UnconditionalBranch => {
                let target = instr.near_branch_target();
                if target < entry.0 || target >= end {
                    out.tail_jumps.push(VirtAddr(instr.ip()));
                }
            }
            _ => {}
        }
    }
    out
}

/// Addresses of every RET in the function (see [`scan`]).
pub fn ret_addresses(code: &[u8], entry: VirtAddr) -> Vec<VirtAddr> {
    scan(code, entry).rets
}

/// Whether any instruction that starts in `[entry, until)` may change RSP (writes it by any
/// means: `push`, `pop`, `call`, `sub rsp, N`, `mov rsp, ...`, as iced-x86's register-access
/// info reports), or a byte in that range does not decode. `false` for an empty range.
///
/// Used to check that a probe placed at `until` sees the stack pointer a function was entered
/// with (Go's stack ABI reads arguments relative to it).
pub fn stack_pointer_written(code: &[u8], entry: VirtAddr, until: VirtAddr) -> bool {
    use iced_x86::{InstructionInfoFactory, Register};
    let mut factory = InstructionInfoFactory::new();
    for instr in instructions(code, entry) {
        if instr.ip() >= until.0 {
            return false;
        }
        if instr.is_invalid() {
            return true;
        }
        if writes_register(factory.info(&instr), Register::RSP) {
            return true;
        }
    }
    // The range runs past the code: what lies beyond was not checked.
    until.0 > entry.0.saturating_add(code.len() as u64)
}

/// Whether the instruction `info` describes may write `which` or any part of it (explicitly or
/// implicitly: `push` writes RSP), as iced-x86's register-access info reports.
pub fn writes_register(info: &iced_x86::InstructionInfo, which: iced_x86::Register) -> bool {
    use iced_x86::OpAccess;
    info.used_registers().iter().any(|r| {
        r.register().full_register() == which
            && !matches!(
                r.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::None
            )
    })
}

/// Every direct near branch or call of `code` (first byte at `address`), as `(source, target)`
/// addresses in code order (a linear sweep; x86 resynchronises within a few instructions after
/// data inside code).
pub fn direct_branches(code: &[u8], address: VirtAddr) -> Vec<(u64, u64)> {
    use iced_x86::OpKind;
    instructions(code, address)
        .filter(|i| {
            matches!(
                i.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            )
        })
        .map(|i| (i.ip(), i.near_branch_target()))
        .collect()
}

/// The instructions of `code` decoded from `entry` on, in 64-bit mode. Undecodable bytes come out
/// as invalid instructions; the iterator stops at the end of `code` (an instruction cut off by the
/// end is invalid, never read past it).
pub fn instructions(code: &[u8], entry: VirtAddr) -> impl Iterator<Item = Instruction> + '_ {
    let mut decoder = Decoder::with_ip(64, code, entry.0, DecoderOptions::NONE);
    std::iter::from_fn(move || {
        if !decoder.can_decode() {
            return None;
        }
        let mut instr = Instruction::default();
        decoder.decode_out(&mut instr);
        Some(instr)
    })
}

/// Decodes `code` (x86-64) from its first byte until an instruction starts at or covers
/// `target`. `target == 0` is always reached; a `target` at or past `code.len()` is reached
/// only when the instructions end exactly there. Never reads outside `code`, never panics.
pub fn instruction_boundary(code: &[u8], target: usize) -> Boundary {
    let mut pos = 0usize;
    for instr in instructions(code, VirtAddr(0)) {
        if pos == target {
            return Boundary::Reached;
        }
        if instr.is_invalid() {
            return Boundary::Undecodable { at: pos };
        }
        let len = instr.len();
        if target < pos + len {
            return Boundary::Inside { start: pos, len };
        }
        pos += len;
    }
    if pos == target {
        Boundary::Reached
    } else {
        Boundary::Undecodable { at: pos }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_ret_and_skips_padding() {
        // xor eax,eax; test rdi,rdi; je +1; ret; mov eax,1; ret 8
        let code = [
            0x31, 0xc0, 0x48, 0x85, 0xff, 0x74, 0x01, 0xc3, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc2,
            0x08, 0x00,
        ];
        let s = scan(&code, VirtAddr(0x1000));
        assert_eq!(s.rets, vec![VirtAddr(0x1007), VirtAddr(0x100d)]);
        assert_eq!(s.invalid, 0);
        assert!(s.tail_jumps.is_empty());
    }

    #[test]
    fn a_c3_inside_an_immediate_is_not_a_ret() {
        // mov eax, 0xc3c3c3c3; ret
        let code = [0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3];
        assert_eq!(ret_addresses(&code, VirtAddr(0x10)), vec![VirtAddr(0x15)]);
    }

    #[test]
    fn jump_out_of_the_function_is_a_tail_jump() {
        // jmp rel32 to far away
        let code = [0xe9, 0x00, 0x10, 0x00, 0x00];
        let s = scan(&code, VirtAddr(0x1000));
        assert_eq!(s.tail_jumps, vec![VirtAddr(0x1000)]);
        assert!(s.rets.is_empty());
    }

    #[test]
    fn stack_pointer_writes_are_seen() {
        // cmp rsp,[r14+0x10]; jbe +0; sub rsp,0x18; ret
        let code = [
            0x49, 0x3b, 0x66, 0x10, 0x76, 0x00, 0x48, 0x83, 0xec, 0x18, 0xc3,
        ];
        let at = |o: u64| VirtAddr(0x1000 + o);
        assert!(!stack_pointer_written(&code, at(0), at(0)));
        // The stack check compares RSP and branches: nothing written.
        assert!(!stack_pointer_written(&code, at(0), at(6)));
        // `sub rsp` writes it.
        assert!(stack_pointer_written(&code, at(0), at(10)));
        // push rbx
        assert!(stack_pointer_written(&[0x53, 0xc3], at(0), at(1)));
        // A range past the code is not vouched for.
        assert!(stack_pointer_written(&code[..4], at(0), at(6)));
    }

    #[test]
    fn cut_off_instruction_is_invalid_not_read_past() {
        // mov eax, imm32 with only two immediate bytes present
        let s = scan(&[0xb8, 0x01, 0x02], VirtAddr(0));
        assert!(s.rets.is_empty());
        assert_eq!(s.invalid, 1);
    }
}
