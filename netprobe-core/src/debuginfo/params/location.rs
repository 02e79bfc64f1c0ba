//! Where a parameter is at one address: its location expression (or the location-list entry
//! covering the address) evaluated into registers and memory at a register plus an offset, the
//! only places a uprobe fetch-arg reads (kernel `Documentation/trace/uprobetracer.rst`,
//! "FETCHARGS": `%REG`, `+|-OFFS(FETCHARG)`).
//!
//! DWARF register numbers are the x86-64 psABI's (§3.6.2, Figure 3.36: 0 rax, 1 rdx, 2 rcx,
//! 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 17-32 xmm0-15).

use super::die::{attr_followed, malformed};
use crate::abi::Register;
use crate::debuginfo::{DebugSections, Reader};
use gimli::{AttributeValue, DebuggingInformationEntry, Expression, Operation, Unit};

/// Most operations an expression may have (a parameter's location needs a handful).
const MAX_OPERATIONS: usize = 64;
/// Most location-list entries looked at.
const MAX_LIST_ENTRIES: usize = 4096;

/// Where one piece of a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// In a register.
    Register(Register),
    /// In memory at the address `base` holds at the probe point, plus `offset`.
    Memory { base: Register, offset: i64 },
    /// Nowhere: the compiler kept no copy of this part (`DW_OP_piece` with no location).
    OptimizedOut,
}

/// One piece of a value: `bytes` long (`None`: the whole value) at `place`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    pub bytes: Option<u64>,
    pub place: Place,
}

/// A parameter's location at one address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// In these pieces, in order from the value's first byte.
    Pieces(Vec<Piece>),
    /// Not readable there, and why.
    Unreadable(String),
}

/// The canonical frame address at one address: `register + offset` (DWARF 5 §6.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cfa {
    pub register: Register,
    pub offset: i64,
}

impl Cfa {
    /// At a function's first instruction on x86-64, the CFA is the caller's stack pointer before
    /// its `call` pushed the return address: `rsp + 8` (psABI §3.2.2).
    pub const AT_ENTRY: Cfa = Cfa {
        register: Register::Sp,
        offset: 8,
    };
}

/// The register DWARF number `n` names, for the integer registers.
pub fn dwarf_register(n: u16) -> Option<Register> {
    use Register::*;
    Some(match n {
        0 => Ax,
        1 => Dx,
        2 => Cx,
        3 => Bx,
        4 => Si,
        5 => Di,
        6 => Bp,
        7 => Sp,
        8 => R8,
        9 => R9,
        10 => R10,
        11 => R11,
        12 => R12,
        13 => R13,
        14 => R14,
        15 => R15,
        _ => return None,
    })
}

fn register_or_why(n: gimli::Register) -> Result<Register, String> {
    dwarf_register(n.0).ok_or_else(|| match n.0 {
        17..=32 => format!(
            "in xmm{}, a vector register uprobe fetch-args cannot read",
            n.0 - 17
        ),
        other => format!("in DWARF register {other}, which uprobe fetch-args cannot read"),
    })
}

/// The CFA at `pc` from `.eh_frame`, else `.debug_frame`; `None` when neither covers `pc` or
/// the rule is an expression.
pub fn cfa_at(sections: &DebugSections, pc: u64) -> Option<Cfa> {
    use gimli::UnwindSection;
    let mut ctx = Box::new(gimli::UnwindContext::new());
    let cfa_of = |rule: &gimli::CfaRule<usize>| match rule {
        gimli::CfaRule::RegisterAndOffset { register, offset } => Some(Cfa {
            register: dwarf_register(register.0)?,
            offset: *offset,
        }),
        gimli::CfaRule::Expression(_) => None,
    };
    if let Some((eh, bases)) = sections.eh_frame() {
        if let Ok(row) =
            eh.unwind_info_for_address(&bases, &mut ctx, pc, gimli::EhFrame::cie_from_offset)
        {
            return cfa_of(row.cfa());
        }
    }
    let df = sections.debug_frame()?;
    let bases = gimli::BaseAddresses::default();
    let row = df
        .unwind_info_for_address(&bases, &mut ctx, pc, gimli::DebugFrame::cie_from_offset)
        .ok()?;
    cfa_of(row.cfa())
}

/// A function's frame base at one address: an address held by a register plus an offset.
pub(super) type FrameBase = Result<(Register, i64), String>;

/// The expression of attribute `v` that holds at `pc`: the expression itself, or the entry of
/// its location list whose range covers `pc`.
fn expression_at(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    v: AttributeValue<Reader>,
    pc: u64,
) -> Result<Expression<Reader>, String> {
    if let AttributeValue::Exprloc(e) = v {
        return Ok(e);
    }
    let mut list = match dwarf.attr_locations(unit, v) {
        Ok(Some(l)) => l,
        Ok(None) => return Err("its location has a form netprobe does not read".into()),
        Err(e) => return Err(format!("its location list is malformed ({})", malformed(e))),
    };
    for _ in 0..MAX_LIST_ENTRIES {
        match list.next() {
            Ok(Some(entry)) if entry.range.begin <= pc && pc < entry.range.end => {
                return Ok(entry.data)
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(format!("its location list is malformed ({})", malformed(e))),
        }
    }
    Err(format!(
        "optimized out at {pc:#x} (no entry of its location list covers it)"
    ))
}

/// The frame base (`DW_AT_frame_base`) of the subprogram `entry` at `pc`, with the CFA there.
pub(super) fn frame_base(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
    pc: u64,
    entry_pc: u64,
    cfa: Option<Cfa>,
) -> FrameBase {
    let v = attr_followed(unit, entry, gimli::DW_AT_frame_base)
        .ok_or("in the frame, but the function has no frame base (DW_AT_frame_base)")?;
    let expr =
        expression_at(dwarf, unit, v, pc).map_err(|why| format!("in the frame, but {why}"))?;
    let mut ops = expr.operations(unit.encoding());
    let op = ops
        .next()
        .map_err(|e| format!("in the frame, but the frame base is malformed ({e})"))?
        .ok_or("in the frame, but the frame base is empty")?;
    if !matches!(ops.next(), Ok(None)) {
        return Err("in the frame, but the frame base is a computed expression".into());
    }
    // A frame base that is a register (LLVM: `DW_OP_reg7`, rsp after `sub rsp, N`; GCC without
    // CFA: `DW_OP_breg6`) names the frame as the prologue leaves it: at the first instruction
    // the register does not hold that yet.
    let at_entry = pc == entry_pc;
    match op {
        Operation::CallFrameCFA => cfa.map(|c| (c.register, c.offset)).ok_or_else(|| {
            "in the frame, but no call-frame information gives the frame's address there".into()
        }),
        Operation::Register { .. } | Operation::RegisterOffset { .. } if at_entry => {
            Err(super::FRAME_NOT_BUILT.into())
        }
        Operation::Register { register } => Ok((register_or_why(register)?, 0)),
        Operation::RegisterOffset {
            register, offset, ..
        } => Ok((register_or_why(register)?, offset)),
        other => Err(format!(
            "in the frame, but the frame base is {}",
            describe(&other)
        )),
    }
}

/// A short description of an operation netprobe does not evaluate.
fn describe(op: &Operation<Reader>) -> String {
    match op {
        Operation::EntryValue { .. } => {
            "its value at the call (DW_OP_entry_value), which needs the caller's registers".into()
        }
        Operation::StackValue
        | Operation::ImplicitValue { .. }
        | Operation::UnsignedConstant { .. }
        | Operation::SignedConstant { .. } => {
            "a value the debug info computes (a constant, or from other values): not in a register or memory".into()
        }
        Operation::ImplicitPointer { .. } => {
            "a pointer to a value that was optimized out (DW_OP_implicit_pointer)".into()
        }
        Operation::Deref { .. } => "behind a pointer in memory (DW_OP_deref)".into(),
        other => {
            let s = format!("{other:?}");
            let head: String = s
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            format!("a DWARF expression netprobe does not evaluate ({head})")
        }
    }
}

/// The location of parameter `entry` at `pc`, with its function's frame base there.
pub(super) fn evaluate(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
    pc: u64,
    base: &FrameBase,
) -> Location {
    let v = match entry.attr_value(gimli::DW_AT_location) {
        Ok(Some(v)) => v,
        Ok(None) => {
            return Location::Unreadable(
                if matches!(entry.attr(gimli::DW_AT_const_value), Ok(Some(_))) {
                    "a constant the compiler folded into the code (DW_AT_const_value)".into()
                } else {
                    "optimized out (no DW_AT_location)".into()
                },
            )
        }
        Err(e) => return Location::Unreadable(format!("malformed ({e})")),
    };
    let expr = match expression_at(dwarf, unit, v, pc) {
        Ok(e) => e,
        Err(why) => return Location::Unreadable(why),
    };
    match pieces(expr, unit.encoding(), base) {
        Ok(p) => Location::Pieces(p),
        Err(why) => Location::Unreadable(why),
    }
}

/// The pieces a location expression describes.
fn pieces(
    expr: Expression<Reader>,
    encoding: gimli::Encoding,
    base: &FrameBase,
) -> Result<Vec<Piece>, String> {
    let mut ops = expr.operations(encoding);
    let mut out = Vec::new();
    let mut current: Option<Place> = None;
    for _ in 0..MAX_OPERATIONS {
        let op = match ops.next() {
            Ok(Some(op)) => op,
            Ok(None) => {
                return match (current, out.is_empty()) {
                    (Some(place), true) => Ok(vec![Piece { bytes: None, place }]),
                    (None, true) => Err("optimized out (an empty location)".into()),
                    (None, false) => Ok(out),
                    (Some(_), false) => Err("a location after its last piece".into()),
                };
            }
            Err(e) => return Err(format!("a malformed location expression ({e})")),
        };
        if current.is_some() && !matches!(op, Operation::Piece { .. }) {
            return Err(describe(&op));
        }
        match op {
            Operation::Register { register } => {
                current = Some(Place::Register(register_or_why(register)?))
            }
            Operation::RegisterOffset {
                register,
                offset,
                base_type,
            } if base_type.0 == 0 => {
                current = Some(Place::Memory {
                    base: register_or_why(register)?,
                    offset,
                })
            }
            Operation::FrameOffset { offset } => {
                let (reg, off) = base.clone()?;
                current = Some(Place::Memory {
                    base: reg,
                    offset: off.checked_add(offset).ok_or("a frame offset overflows")?,
                })
            }
            Operation::Piece {
                size_in_bits,
                bit_offset: None,
            } if size_in_bits % 8 == 0 => out.push(Piece {
                bytes: Some(size_in_bits / 8),
                place: current.take().unwrap_or(Place::OptimizedOut),
            }),
            Operation::Piece { .. } => return Err("split into bit pieces".into()),
            other => return Err(describe(&other)),
        }
    }
    Err("a location expression too long to be a parameter's".into())
}
