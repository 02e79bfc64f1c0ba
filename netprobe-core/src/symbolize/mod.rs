//! Symbolizing: the inverse of resolving. From a (pid, runtime address) or a (file, file offset)
//! to the function running there: image, function name, offset in the function, and which table
//! named it ([`SourceKind`]): ELF `.symtab`/`.dynsym`, Go's function table (with the functions
//! inlined at that pc, from its inline trees), .NET ReadyToRun methods (the method whose
//! RUNTIME_FUNCTION covers the address), JIT-compiled code from the runtime's `/tmp/perf-PID.map`
//! and jitdump, .NET methods named as C# writes them with their code tier apart
//! ([`crate::dotnet::managed_name`]); anything else is
//! `[unknown] (image+0xOFF)`, never a guess.
//!
//! Layout after blazesym's: [`types`] (what a frame is), [`index`] (one file's code ranges,
//! sorted by file offset), [`jit`] (one process's JIT names), [`resolver`] (the [`Symbolizer`]
//! with its caches), [`note`] (what to do when JIT names are missing; turning them on in a
//! running process writes to its diagnostics socket: [`crate::ipc::dotnet_diagnostics`]).
//!
//! ```no_run
//! use netprobe_core::symbolize::Symbolizer;
//! let mut s = Symbolizer::new();
//! for frame in s.symbolize(1234, 0x7f12_3456_7890)? {
//!     println!("{frame}");
//! }
//! # Ok::<(), netprobe_core::Error>(())
//! ```

pub mod index;
pub mod jit;
pub mod note;
pub mod resolver;
pub mod types;

pub use index::{ImageIndex, IndexHit};
pub use resolver::Symbolizer;
pub use types::{Frame, SourceKind};
