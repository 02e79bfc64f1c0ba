//! Instruction boundaries: where decoding a function linearly from its first byte meets an
//! offset, by the image's architecture. A uprobe replaces the instruction at its offset with a
//! breakpoint (kernel `kernel/events/uprobes.c`): on x86-64 the byte INT3, which inside an
//! instruction is one of its immediate or displacement bytes; on aarch64 a 4-byte `BRK`, which
//! the kernel writes only at a 4-aligned address (`arch/arm64/kernel/probes/uprobes.c`,
//! `arch_uprobe_analyze_insn`: `-EINVAL` otherwise) and which 2 bytes into a word would
//! overwrite halves of two instructions.

/// Where decoding `code` linearly from its first byte meets `target` (a byte index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// An instruction starts at `target`.
    Reached,
    /// The instruction at `start`, `len` bytes long, covers `target`.
    Inside { start: usize, len: usize },
    /// The bytes at `at` do not decode (or an instruction is cut off by the end of `code`)
    /// before `target` (x86-64), or at `target` itself (aarch64: the word probed).
    Undecodable { at: usize },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use proptest::prelude::*;

    fn instruction_boundary(code: &[u8], target: usize) -> Boundary {
        Arch::X86_64.instruction_boundary(code, target)
    }

    /// x86-64 instructions with their lengths, immediates and displacements as `0x11` bytes that
    /// the generator replaces with random ones (they never change an instruction's length).
    const INSTRUCTIONS: &[&[u8]] = &[
        &[0x90],                                                       // nop
        &[0xc3],                                                       // ret
        &[0xcc],                                                       // int3
        &[0x55],                                                       // push rbp
        &[0x48, 0x89, 0xe5],                                           // mov rbp, rsp
        &[0x48, 0x83, 0xec, 0x11],                                     // sub rsp, imm8
        &[0x49, 0x3b, 0x66, 0x11],                                     // cmp rsp, [r14+disp8]
        &[0x0f, 0x86, 0x11, 0x11, 0x11, 0x11],                         // jbe rel32
        &[0x74, 0x11],                                                 // je rel8
        &[0xe8, 0x11, 0x11, 0x11, 0x11],                               // call rel32
        &[0xe9, 0x11, 0x11, 0x11, 0x11],                               // jmp rel32
        &[0xb8, 0x11, 0x11, 0x11, 0x11],                               // mov eax, imm32
        &[0x48, 0xb8, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11], // mov rax, imm64
        &[0x48, 0x8b, 0x44, 0x24, 0x11],                               // mov rax, [rsp+disp8]
        &[0x48, 0x8d, 0x05, 0x11, 0x11, 0x11, 0x11],                   // lea rax, [rip+disp32]
        &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],                         // nop word [rax+rax]
        &[0xf3, 0x0f, 0x1e, 0xfa],                                     // endbr64
        &[0xc2, 0x11, 0x11],                                           // ret imm16
        &[0x48, 0x81, 0xc4, 0x11, 0x11, 0x11, 0x11],                   // add rsp, imm32
    ];

    fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
        proptest::collection::vec(
            (
                0..INSTRUCTIONS.len(),
                proptest::collection::vec(any::<u8>(), 8),
            ),
            1..40,
        )
        .prop_map(|parts| {
            let mut code = Vec::new();
            let mut starts = Vec::new();
            for (i, imm) in parts {
                starts.push(code.len());
                let mut k = 0;
                for &b in INSTRUCTIONS[i] {
                    if b == 0x11 {
                        code.push(imm[k % imm.len()]);
                        k += 1;
                    } else {
                        code.push(b);
                    }
                }
            }
            starts.push(code.len());
            (code, starts)
        })
    }

    proptest! {
        /// Code made of instructions of known lengths: an offset is accepted exactly when an
        /// instruction starts there (or it is the end of the code).
        #[test]
        fn accepted_iff_an_instruction_starts_there((code, starts) in stream(), pick in any::<prop::sample::Index>()) {
            let target = pick.index(code.len() + 1);
            let verdict = instruction_boundary(&code, target);
            if starts.contains(&target) {
                prop_assert_eq!(verdict, Boundary::Reached);
            } else {
                let Boundary::Inside { start, len } = verdict else {
                    return Err(TestCaseError::fail(format!("{verdict:?} at {target}")));
                };
                prop_assert!(starts.contains(&start));
                prop_assert!(start < target && target < start + len);
            }
        }

        /// Arbitrary bytes: never a panic, never an answer outside the code, and an accepted
        /// offset is one the instruction sequence reaches (re-decoding up to it lands on it).
        #[test]
        fn arbitrary_bytes_are_answered_within_bounds(code in proptest::collection::vec(any::<u8>(), 0..64), target in 0usize..80) {
            match instruction_boundary(&code, target) {
                Boundary::Reached => prop_assert!(target <= code.len()),
                Boundary::Inside { start, len } => {
                    prop_assert!(start < target && target < start + len && start + len <= code.len());
                    prop_assert_eq!(instruction_boundary(&code, start), Boundary::Reached);
                }
                Boundary::Undecodable { at } => prop_assert!(at < target),
            }
        }
    }

    #[test]
    fn an_offset_inside_an_immediate_is_not_a_boundary() {
        // mov eax, 0xc3c3c3c3; ret
        let code = [0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3];
        assert_eq!(instruction_boundary(&code, 0), Boundary::Reached);
        assert_eq!(
            instruction_boundary(&code, 2),
            Boundary::Inside { start: 0, len: 5 }
        );
        assert_eq!(instruction_boundary(&code, 5), Boundary::Reached);
        assert_eq!(instruction_boundary(&code, 6), Boundary::Reached);
        // Cut off: the instruction runs past the bytes given.
        assert_eq!(
            instruction_boundary(&code[..3], 3),
            Boundary::Undecodable { at: 0 }
        );
    }
}
