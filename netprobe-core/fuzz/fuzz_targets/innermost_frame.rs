//! Code bytes as read from a sampled process (`netprobe profile`): where the innermost return
//! address is at each offset of them (netprobe_core::innermost_frame).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::addr::VirtAddr;
use netprobe_core::innermost_frame::{innermost_frame, returns_at, InnermostFrame};

fuzz_target!(|data: &[u8]| {
    let entry = VirtAddr(0x40_1000);
    for at in 0..=data.len().min(64) as u64 {
        if let InnermostFrame::OnStack(depth) = innermost_frame(data, entry, VirtAddr(entry.0 + at))
        {
            // A push moves 8 bytes, `sub rsp, N` at most 1 MiB per instruction.
            assert!(depth <= (at + 1) << 20);
        }
    }
    let _ = returns_at(data);
});
