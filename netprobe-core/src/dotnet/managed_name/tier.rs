//! Which code of a method ran: the runtime's optimization tier.

use serde::{Serialize, Serializer};
use std::fmt;

/// The code tier of a .NET method's code, as the runtime names it in its perf map (the `[...]`
/// suffix `PerfMap::LogJITCompiledMethod` appends when `PerfMapShowOptimizationTiers` is on, the
/// default: dotnet/runtime `src/coreclr/vm/perfmap.cpp`, strings from
/// `PrepareCodeConfig::GetJitOptimizationTierStr` in `src/coreclr/vm/prestub.cpp`), or
/// [`CodeTier::ReadyToRun`] for precompiled code read from the assembly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CodeTier {
    /// Precompiled code (ReadyToRun; `ReadyToRun` and `PreJIT` in perf maps).
    ReadyToRun,
    /// Tier 0, compiled quickly without optimizing (`QuickJitted`).
    Tier0,
    /// Tier 0 with instrumentation for profile-guided optimization (`InstrumentedTier`,
    /// `InstrumentedTierOptimized`).
    Instrumented,
    /// Tier 1, optimized after the method proved hot (`OptimizedTier1`).
    Tier1,
    /// On-stack replacement: a loop's optimized code entered mid-method (`OptimizedTier1OSR`).
    Osr,
    /// Optimized from the start: tiering off, or a method that opts out of it (`Optimized`).
    Optimized,
    /// Compiled with minimal optimization (`MinOptJitted`).
    MinOpts,
    /// A tier string this list does not know, kept as written.
    Other(String),
}

impl CodeTier {
    /// The tier the runtime's perf map suffix `s` (without brackets) names.
    pub fn from_runtime(s: &str) -> CodeTier {
        match s {
            "ReadyToRun" | "PreJIT" => CodeTier::ReadyToRun,
            "QuickJitted" => CodeTier::Tier0,
            "InstrumentedTier" | "InstrumentedTierOptimized" => CodeTier::Instrumented,
            "OptimizedTier1" => CodeTier::Tier1,
            "OptimizedTier1OSR" => CodeTier::Osr,
            "Optimized" => CodeTier::Optimized,
            "MinOptJitted" => CodeTier::MinOpts,
            other => CodeTier::Other(other.to_string()),
        }
    }

    /// The short name JSON and text use: `ready_to_run`, `tier0`, `tier1`, `osr`...
    pub fn as_str(&self) -> &str {
        match self {
            CodeTier::ReadyToRun => "ready_to_run",
            CodeTier::Tier0 => "tier0",
            CodeTier::Instrumented => "instrumented",
            CodeTier::Tier1 => "tier1",
            CodeTier::Osr => "osr",
            CodeTier::Optimized => "optimized",
            CodeTier::MinOpts => "min_opts",
            CodeTier::Other(s) => s,
        }
    }
}

impl fmt::Display for CodeTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CodeTier {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
