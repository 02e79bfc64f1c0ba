//! What to tell a user whose .NET frames print as `[unknown]`.

use std::collections::HashSet;
use std::sync::Mutex;

/// Processes whose missing JIT names the caller has explained already (it tried to turn their
/// perf map on and said why it could not): the symbolizer adds no second line for them. Shared
/// by every [`crate::symbolize::Symbolizer`] of the program, as the caller that explained it and
/// the symbolizer deep inside a session do not share an object.
static EXPLAINED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// Says that the missing JIT names of process `pid` were explained to the user.
pub fn jit_names_explained(pid: u32) {
    EXPLAINED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(pid);
}

/// Whether [`jit_names_explained`] was said of `pid`.
pub fn is_explained(pid: u32) -> bool {
    EXPLAINED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .is_some_and(|s| s.contains(&pid))
}

/// The note for a .NET process `pid` that runs code in anonymous executable memory without a
/// perf map: JIT-compiled methods have no names unless the runtime writes them
/// (`DOTNET_PerfMapEnabled`, dotnet/runtime `src/coreclr/inc/clrconfigvalues.h` and
/// `src/coreclr/vm/perfmap.h`: 1 = perf map and jitdump, 2 = jitdump, 3 = perf map), or, in a
/// running .NET 8+ process, the diagnostics command `EnablePerfMap` turns it on, which
/// `profile`, `trace --stack` and `count --stack` send unless told not to
/// ([`crate::ipc::perf_map_session`]).
pub fn jit_names_note(pid: u32) -> String {
    format!(
        "process {pid} runs JIT-compiled .NET code without a perf map, so those frames print as [unknown]: without --no-perf-map, netprobe turns the map on for its session in a .NET 8+ process given with -p; or start the process with DOTNET_PerfMapEnabled=1 to name them"
    )
}
