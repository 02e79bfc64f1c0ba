//! One unwinding step by call-frame information: `.eh_frame` (found through `.eh_frame_hdr`'s
//! sorted table when the file has one) and `.debug_frame` as the fallback, read with gimli.
//!
//! The rules are DWARF's (DWARF 5 §6.4, "Call Frame Information"; the `.eh_frame` form is the
//! LSB's "Exception Frames"): at a pc, the canonical frame address (CFA) is a register plus an
//! offset or an expression, and each register the function saved has a rule saying where its
//! caller's value is. On x86-64 the return address is at CFA-8 (column 16) and the caller's rsp
//! is the CFA (psABI §3.6.2).
//!
//! Lazily and once: a pc's row is computed the first time it is asked for, through gimli's
//! `UnwindContext` (reused across lookups) and a cache of parsed CIEs; the row's rules are kept
//! per pc, so a profile's hot return addresses cost one hash lookup after the first.

use super::registers::{Registers, StackMemory, RA, RSP};
use crate::debuginfo::{DebugSections, Reader};
use gimli::{
    BaseAddresses, CfaRule, CommonInformationEntry, DebugFrame, EhFrame, Evaluation,
    EvaluationResult, Location, ParsedEhFrameHdr, Register, RegisterRule, UnwindContext,
    UnwindSection, Value,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Rows kept per image before the cache starts over (a long profile of a large program must not
/// grow without bound).
const MAX_CACHED_ROWS: usize = 1 << 16;

/// Steps an expression may take (a hostile `.eh_frame` can hold a loop).
const MAX_EXPRESSION_STEPS: u32 = 1000;

/// Which section a row came from (its expressions are offsets into it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Section {
    EhFrame,
    DebugFrame,
}

/// The rules of one row, owned.
#[derive(Clone, Debug)]
struct Row {
    section: Section,
    cfa: CfaRule<usize>,
    /// Rules for the registers the row names; the others keep their value (callee-saved
    /// registers the function did not touch).
    registers: Vec<(Register, RegisterRule<usize>)>,
    /// The CIE's return-address column.
    return_address: Register,
}

/// Why a CFI step could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CfiMiss {
    /// No FDE covers the pc: another method may know the frame.
    NoEntry,
    /// An entry covers it but cannot be followed; says why.
    Broken(String),
}

struct State {
    context: Box<UnwindContext<usize>>,
    cies: HashMap<(Section, usize), CommonInformationEntry<Reader>>,
    rows: HashMap<u64, Option<Arc<Row>>>,
}

/// The call-frame information of one image.
pub struct CallFrameInfo {
    eh_frame: Option<(
        EhFrame<Reader>,
        BaseAddresses,
        Option<ParsedEhFrameHdr<Reader>>,
    )>,
    debug_frame: Option<(DebugFrame<Reader>, BaseAddresses)>,
    state: Mutex<State>,
}

impl std::fmt::Debug for CallFrameInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFrameInfo")
            .field("eh_frame", &self.eh_frame.is_some())
            .field("debug_frame", &self.debug_frame.is_some())
            .finish()
    }
}

impl CallFrameInfo {
    /// The call frames of an image: its own `.eh_frame` (and `.eh_frame_hdr`), and
    /// `.debug_frame` from the image or, when it has none, from `debug_file` (a separate debug
    /// file of the same build). `None` when neither has any.
    pub fn new(image: &DebugSections, debug_file: Option<&DebugSections>) -> Option<CallFrameInfo> {
        let eh_frame = image.eh_frame().map(|(mut eh, bases)| {
            eh.set_address_size(8);
            let hdr = image
                .eh_frame_hdr()
                .and_then(|h| h.parse(&bases, 8).ok())
                .filter(|h| h.table().is_some());
            (eh, bases, hdr)
        });
        let debug_frame = image
            .debug_frame()
            .or_else(|| debug_file.and_then(DebugSections::debug_frame))
            .map(|mut d| {
                d.set_address_size(8);
                (d, BaseAddresses::default())
            });
        if eh_frame.is_none() && debug_frame.is_none() {
            return None;
        }
        Some(CallFrameInfo {
            eh_frame,
            debug_frame,
            state: Mutex::new(State {
                context: Box::new(UnwindContext::new()),
                cies: HashMap::new(),
                rows: HashMap::new(),
            }),
        })
    }

    /// The row covering link-time address `pc`, computed once.
    fn row(&self, pc: u64) -> Option<Arc<Row>> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let state = &mut *guard;
        if let Some(r) = state.rows.get(&pc) {
            return r.clone();
        }
        if state.rows.len() >= MAX_CACHED_ROWS {
            state.rows.clear();
        }
        let row = self
            .eh_frame_row(state, pc)
            .or_else(|| self.debug_frame_row(state, pc))
            .map(Arc::new);
        state.rows.insert(pc, row.clone());
        row
    }

    fn eh_frame_row(&self, state: &mut State, pc: u64) -> Option<Row> {
        let (eh, bases, hdr) = self.eh_frame.as_ref()?;
        let cies = &mut state.cies;
        let get_cie = |s: &EhFrame<Reader>, b: &BaseAddresses, o: gimli::EhFrameOffset<usize>| {
            if let Some(c) = cies.get(&(Section::EhFrame, o.0)) {
                return Ok(c.clone());
            }
            let c = s.cie_from_offset(b, o)?;
            cies.insert((Section::EhFrame, o.0), c.clone());
            Ok(c)
        };
        let fde = match hdr.as_ref().and_then(|h| h.table()) {
            Some(table) => table.fde_for_address(eh, bases, pc, get_cie).ok()?,
            None => eh.fde_for_address(bases, pc, get_cie).ok()?,
        };
        let row = fde
            .unwind_info_for_address(eh, bases, &mut state.context, pc)
            .ok()?;
        Some(own(
            Section::EhFrame,
            row,
            fde.cie().return_address_register(),
        ))
    }

    fn debug_frame_row(&self, state: &mut State, pc: u64) -> Option<Row> {
        let (df, bases) = self.debug_frame.as_ref()?;
        let cies = &mut state.cies;
        let get_cie =
            |s: &DebugFrame<Reader>, b: &BaseAddresses, o: gimli::DebugFrameOffset<usize>| {
                if let Some(c) = cies.get(&(Section::DebugFrame, o.0)) {
                    return Ok(c.clone());
                }
                let c = s.cie_from_offset(b, o)?;
                cies.insert((Section::DebugFrame, o.0), c.clone());
                Ok(c)
            };
        let fde = df.fde_for_address(bases, pc, get_cie).ok()?;
        let row = fde
            .unwind_info_for_address(df, bases, &mut state.context, pc)
            .ok()?;
        Some(own(
            Section::DebugFrame,
            row,
            fde.cie().return_address_register(),
        ))
    }

    /// Whether an entry covers link-time address `pc`.
    pub fn covers(&self, pc: u64) -> bool {
        self.row(pc).is_some()
    }

    /// One step: the caller's registers, given the frame's registers `regs` and its pc relative
    /// to the image's link-time addresses (`lookup_pc`: for a return address, one byte before
    /// it, so the row of the call is used). The caller's rip is the return-address column's
    /// rule, its rsp the CFA, the other registers their rules or their own values.
    pub fn step(
        &self,
        lookup_pc: u64,
        regs: &Registers,
        stack: &dyn StackMemory,
    ) -> Result<Registers, CfiMiss> {
        let row = self.row(lookup_pc).ok_or(CfiMiss::NoEntry)?;
        let expr =
            |e: &gimli::UnwindExpression<usize>| -> Result<gimli::Expression<Reader>, CfiMiss> {
                let got = match row.section {
                    Section::EhFrame => self.eh_frame.as_ref().map(|(s, ..)| e.get(s)),
                    Section::DebugFrame => self.debug_frame.as_ref().map(|(s, _)| e.get(s)),
                };
                match got {
                    Some(Ok(x)) => Ok(x),
                    _ => Err(CfiMiss::Broken(
                        "an expression lies outside its section".into(),
                    )),
                }
            };
        let cfa = match &row.cfa {
            CfaRule::RegisterAndOffset { register, offset } => regs
                .get(register.0)
                .and_then(|v| v.checked_add_signed(*offset))
                .ok_or_else(|| {
                    CfiMiss::Broken(format!(
                        "the CFA is based on unknown register {}",
                        register.0
                    ))
                })?,
            CfaRule::Expression(e) => evaluate(expr(e)?, regs, stack, None)
                .ok_or_else(|| CfiMiss::Broken("the CFA expression cannot be evaluated".into()))?,
        };
        let mut caller = *regs;
        caller.set(RSP, Some(cfa));
        // The return-address column counts as undefined unless a rule names it.
        let mut ra_rule = false;
        for (reg, rule) in &row.registers {
            let value = match rule {
                RegisterRule::Undefined => None,
                RegisterRule::SameValue => regs.get(reg.0),
                RegisterRule::Offset(o) => {
                    let at = cfa.checked_add_signed(*o).ok_or_else(|| {
                        CfiMiss::Broken("a saved register's address overflows".into())
                    })?;
                    Some(stack.read_u64(at).ok_or_else(|| {
                        CfiMiss::Broken(format!(
                            "register {} is saved at {at:#x}, outside the copied stack",
                            reg.0
                        ))
                    })?)
                }
                RegisterRule::ValOffset(o) => cfa.checked_add_signed(*o),
                RegisterRule::Register(r) => regs.get(r.0),
                RegisterRule::Expression(e) => {
                    evaluate(expr(e)?, regs, stack, Some(cfa)).and_then(|a| stack.read_u64(a))
                }
                RegisterRule::ValExpression(e) => evaluate(expr(e)?, regs, stack, Some(cfa)),
                RegisterRule::Constant(c) => Some(*c),
                _ => None,
            };
            if *reg == row.return_address {
                ra_rule = true;
                caller.set(RA, value);
            } else if reg.0 != RSP {
                caller.set(reg.0, value);
            }
        }
        if !ra_rule {
            caller.set(RA, None);
        }
        Ok(caller)
    }
}

fn own(section: Section, row: &gimli::UnwindTableRow<usize>, return_address: Register) -> Row {
    Row {
        section,
        cfa: row.cfa().clone(),
        registers: row.registers().cloned().collect(),
        return_address,
    }
}

/// Evaluates a call-frame expression to an address (its one piece's location), reading
/// registers from `regs` and memory from `stack`; `cfa` is pushed first for register rules
/// (DWARF 5 §6.4.2.3: "the value of the CFA is pushed on the stack" before a register's
/// `DW_CFA_expression`). `None` when it needs what is not known or takes too many steps.
fn evaluate(
    expr: gimli::Expression<Reader>,
    regs: &Registers,
    stack: &dyn StackMemory,
    cfa: Option<u64>,
) -> Option<u64> {
    let encoding = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 4,
    };
    let mut eval: Evaluation<Reader> = expr.evaluation(encoding);
    eval.set_max_iterations(MAX_EXPRESSION_STEPS);
    if let Some(c) = cfa {
        eval.set_initial_value(c);
    }
    let mut result = eval.evaluate().ok()?;
    loop {
        result = match result {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register, .. } => eval
                .resume_with_register(Value::Generic(regs.get(register.0)?))
                .ok()?,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let word = stack.read_u64(address)?;
                let v = if size >= 8 {
                    word
                } else {
                    word & ((1u64 << (u32::from(size) * 8)) - 1)
                };
                eval.resume_with_memory(Value::Generic(v)).ok()?
            }
            _ => return None,
        };
    }
    match eval.result().first()?.location {
        Location::Address { address } => Some(address),
        Location::Value {
            value: Value::Generic(v),
        } => Some(v),
        _ => None,
    }
}
