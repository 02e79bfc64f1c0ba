//! Turns a ReadyToRun image's entry points into named methods with code ranges and file offsets.
//!
//! - METHODDEF_ENTRYPOINTS: MethodDef row -> RUNTIME_FUNCTIONS index (readytorun-format.md).
//! - INSTANCE_METHOD_ENTRYPOINTS: a method signature (flags, owner type, token, instantiation)
//!   followed by the same entry-point record (ILCompiler.Reflection.ReadyToRun's reader reads it
//!   in this order: flags, module if UpdateContext, owner type, token, method instantiation,
//!   constrained type, entry point).
//! - A method's funclets are the RUNTIME_FUNCTIONS that follow its main body up to the next
//!   entry point (the same rule as ILCompiler.Reflection.ReadyToRun's `CountRuntimeFunctions`);
//!   cold parts come from HOT_COLD_MAP (pairs of cold, hot runtime function indices).
//!
//! One concept per file: `listing.rs` (every method of an image, named, on one or two threads),
//! `instance.rs` (INSTANCE_METHOD_ENTRYPOINTS records and their names), `owners.rs` (a
//! method's owning type, its nesting and parameter names), `code_map.rs` (a method's code: main
//! body, funclets, cold parts), `details.rs` (one method described), `siblings.rs` (the other
//! assemblies of a version bubble).

mod code_map;
mod details;
mod instance;
mod listing;
mod owners;
mod siblings;

pub(crate) use details::details;
pub(crate) use listing::{method_def_names, methods, methods_where};
pub use siblings::SiblingAssemblies;
