//! What a sweep over one function's code found: its return sites and tail jumps, on any
//! architecture (the sweep itself is [`super::Arch::scan`]).

use crate::addr::VirtAddr;
use serde::Serialize;

/// What a sweep over one function found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CodeScan {
    /// Address of every return instruction in the function, ascending (x86-64 `RET`, `C3`,
    /// `C2 iw`; aarch64 `RET`, `RETAA`, `RETAB`). A uprobe on each one replaces a uretprobe: it
    /// fires on every return path with the return value in its register.
    pub rets: Vec<VirtAddr>,
    /// Direct unconditional jumps whose target lies outside the function (x86-64 `JMP`,
    /// aarch64 `B`): tail calls (Go emits them in wrappers). A return through one of them
    /// passes no return instruction of this function.
    pub tail_jumps: Vec<VirtAddr>,
    /// Instructions that failed to decode (0 for real code; an aarch64 Go function's literal
    /// pool may add some).
    pub invalid: usize,
}
