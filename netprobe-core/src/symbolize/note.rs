//! What to tell a user whose .NET frames print as `[unknown]`.

/// The note for a .NET process `pid` that runs code in anonymous executable memory without a
/// perf map: JIT-compiled methods have no names unless the runtime writes them
/// (`DOTNET_PerfMapEnabled`, dotnet/runtime `src/coreclr/inc/clrconfigvalues.h` and
/// `src/coreclr/vm/perfmap.h`: 1 = perf map and jitdump, 2 = jitdump, 3 = perf map), or, in a
/// running .NET 8+ process, the
/// diagnostics IPC command `EnablePerfMap` ([`crate::ipc::dotnet_diagnostics::enable_perf_map`]) turns it on.
pub fn jit_names_note(pid: u32) -> String {
    format!(
        "process {pid} runs JIT-compiled .NET code without a perf map, so those frames print as [unknown]: start it with DOTNET_PerfMapEnabled=1 to name them, or (.NET 8 and later) turn perf maps on in the running process through its diagnostics socket (netprobe_core::ipc::dotnet_diagnostics::enable_perf_map); methods compiled before that stay unnamed"
    )
}
