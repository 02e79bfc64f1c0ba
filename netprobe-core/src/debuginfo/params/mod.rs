//! A function's formal parameters from DWARF: name, type, and where each one is at a probe point,
//! the way `perf probe --vars` and bpftrace's `args` read them.
//!
//! - [`find_function`] finds a subprogram by name (`DW_AT_name`/`DW_AT_linkage_name`) or by its
//!   entry address (`DW_AT_low_pc`, `DW_AT_entry_pc`, or the start of a `DW_AT_ranges` range),
//!   following `DW_AT_abstract_origin`/`DW_AT_specification` for the names and types an
//!   out-of-line copy of an inlined function leaves to its abstract instance (DWARF 5 §3.3.8).
//! - [`ParamType`] resolves a parameter's type through typedefs and qualifiers to what a probe can
//!   decode: integers, bool, char, floats, pointers, C strings, Go string and slice headers (Go
//!   `src/cmd/link/internal/ld/dwarf.go` writes them as structs `{str, len}` and
//!   `{array, len, cap}`), Rust `&str` (`{data_ptr, length}`), and small structs by field.
//! - [`Location`] evaluates a parameter's `DW_AT_location` at one address: a single expression,
//!   or the entry of a location list whose range covers the address (DWARF 5 §2.6.2). Registers
//!   (`DW_OP_reg*`, `DW_OP_regx`), memory at a register plus an offset (`DW_OP_breg*`), memory at
//!   the frame base plus an offset (`DW_OP_fbreg`, with the function's `DW_AT_frame_base`:
//!   `DW_OP_call_frame_cfa` is turned into a register and offset with the call-frame information
//!   at that address) and pieces of those (`DW_OP_piece`: Go's register ABI passes a string in two
//!   registers) are readable. Anything else (no location, an entry value, a computed value, a
//!   vector register) is [`Location::Unreadable`] with the reason: never guessed.
//!
//! Hostile files: every walk over type DIEs is bounded ([`MAX_TYPE_DEPTH`], cycles end there),
//! parameters and fields are capped, and every gimli error becomes an error or a reason, never a
//! panic.

mod die;
mod function;
mod location;
mod types;

pub use function::{find_function, prologue_end, FunctionDie, FunctionQuery};
pub use location::{cfa_at, Cfa, Location, Piece, Place};
pub use types::{Field, ParamType, MAX_TYPE_DEPTH};

use super::{DebugSections, Reader};
use crate::error::Result;

/// At most this many parameters are read per function.
pub const MAX_PARAMS: usize = 64;

/// One formal parameter at one address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// `DW_AT_name` (or its abstract origin's); `argN` when it has none.
    pub name: String,
    pub ty: ParamType,
    pub location: Location,
}

/// A function's parameters at one address of its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionParams {
    pub function: FunctionDie,
    /// The address the locations were evaluated at.
    pub pc: u64,
    pub params: Vec<Param>,
}

/// The parameters of `function` where they are at `pc` (an address of its code). `sections`
/// gives the call-frame information `DW_OP_call_frame_cfa` needs (at the function's entry,
/// without CFI, the x86-64 psABI's CFA of `rsp+8` is used).
pub fn params_at(
    sections: &DebugSections,
    dwarf: &gimli::Dwarf<Reader>,
    function: &FunctionDie,
    pc: u64,
) -> Result<FunctionParams> {
    let cfa = cfa_at(sections, pc).or((pc == function.entry).then_some(Cfa::AT_ENTRY));
    let mut params = function::read_params(dwarf, function, pc, cfa)?;
    if pc == function.entry {
        for p in &mut params {
            if let Some(why) = not_built_at_entry(&p.location) {
                p.location = Location::Unreadable(why.into());
            }
        }
    }
    Ok(FunctionParams {
        function: function.clone(),
        pc,
        params,
    })
}

/// At a function's first instruction its own frame does not exist yet: a location below the
/// return address (`rsp+8` and up is the caller's) or relative to `rbp` (still the caller's frame
/// pointer) names memory the prologue has not written. DWARF of unoptimized code gives such
/// locations for the whole function (GCC `-O0` stores each argument in the frame), valid only
/// after the prologue.
fn not_built_at_entry(location: &Location) -> Option<&'static str> {
    let Location::Pieces(pieces) = location else {
        return None;
    };
    pieces.iter().find_map(|p| match p.place {
        Place::Memory {
            base: crate::abi::Register::Sp,
            offset,
        } if offset < 8 => Some(FRAME_NOT_BUILT),
        Place::Memory {
            base: crate::abi::Register::Bp,
            ..
        } => Some(FRAME_NOT_BUILT),
        _ => None,
    })
}

/// Why a parameter stored in the function's own frame cannot be read at its first instruction.
pub const FRAME_NOT_BUILT: &str =
    "stored in the function's own stack frame, which its prologue has not built at the first instruction";
