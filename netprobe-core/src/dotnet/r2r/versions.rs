//! The ReadyToRun format versions netprobe reads: a leaf, so that the error messages
//! (`crate::error`) can name the range without depending on the parser.

/// Oldest and newest major format versions this reader accepts. `src/coreclr/inc/readytorun.h`
/// in dotnet/runtime keeps the history: 2.x (.NET Core 2.x), 3.0 changed calling conventions,
/// 6.0 type layout, 8.0 Int128 alignment, 9.x (.NET 8) Vector512 and new helpers, 10.x (.NET 9)
/// per-type statics, 11 and 13 GC info v4 and the funclet ABI, 12 return buffers, 14 x86
/// funclets, 15 helper removals, 16 (.NET 10) the debug-info encoding. None of these touches
/// what netprobe reads: the header and section list, RUNTIME_FUNCTIONS, METHODDEF_ENTRYPOINTS,
/// INSTANCE_METHOD_ENTRYPOINTS, COMPILER_IDENTIFIER and the composite sections
/// (`docs/design/coreclr/botr/readytorun-format.md`). Seen on real images: 3.1 (.NET Core
/// 3.1.23 CoreLib), 9.1 (.NET 8.0.4), 10.1 (.NET 9.0.5), 16.0 (.NET 10.0.13). A major version
/// above [`MAX_MAJOR`] may have changed them, and is refused rather than guessed at.
pub const MIN_MAJOR: u16 = 2;
pub const MAX_MAJOR: u16 = 16;
