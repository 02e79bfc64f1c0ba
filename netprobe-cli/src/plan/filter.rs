//! A user's filter bound to a plan's probes: each name the filter mentions becomes the field a
//! probe fetches it into (`crate::filter::ProbeFilter`), per probe, so a backend can evaluate the
//! filter where hits are made (tracefs: the event's `filter` file, kernel
//! `Documentation/trace/events.rst` "Event filtering"). A probe that reads only the other end of
//! a call (a return probe for a filter on entry arguments) stays unfiltered, said in the notes.

use super::{Decode, FunctionId, KernelProbe, ProbePlan, Role};
use crate::error::{Error, Result};
use crate::filter::{
    int_range, CmpOp, Constant, Expr, FieldKind, Operand, ProbeFilter, Subject, Test,
};

/// The values of a probe a filter may name: (argument name, field, kind).
fn probe_values(p: &KernelProbe) -> Vec<(String, String, FieldKind)> {
    p.args
        .iter()
        .map(|a| {
            let (field, kind) = match &a.decode {
                Decode::Int { field, ty } => (field.clone(), FieldKind::Int(*ty)),
                Decode::CString { field } => (field.clone(), FieldKind::CString),
                Decode::Utf16 { chars_field, .. } => (chars_field.clone(), FieldKind::Utf16),
                Decode::GoString { bytes_field, .. } => (bytes_field.clone(), FieldKind::GoString),
                Decode::Raw { field } => (field.clone(), FieldKind::Raw),
            };
            (a.name.clone(), field, kind)
        })
        .collect()
}

/// Resolves `e` against the values of probe `p`: every name must be one of its values.
/// `Err(Missing)` lists the names it lacks; `Err(Refused)` says why a comparison cannot be made.
fn resolve(e: &Expr, p: &KernelProbe) -> std::result::Result<ProbeFilter, Unresolved> {
    let values = probe_values(p);
    let missing: Vec<String> = e
        .names()
        .into_iter()
        .filter(|n| !values.iter().any(|(a, _, _)| a == n))
        .collect();
    if !missing.is_empty() {
        return Err(Unresolved::Missing(missing));
    }
    resolve_tree(e, &values).map_err(Unresolved::Refused)
}

enum Unresolved {
    Missing(Vec<String>),
    Refused(String),
}

fn resolve_tree(
    e: &Expr,
    values: &[(String, String, FieldKind)],
) -> std::result::Result<ProbeFilter, String> {
    Ok(match e {
        Expr::Or(a, b) => ProbeFilter::Or(
            Box::new(resolve_tree(a, values)?),
            Box::new(resolve_tree(b, values)?),
        ),
        Expr::And(a, b) => ProbeFilter::And(
            Box::new(resolve_tree(a, values)?),
            Box::new(resolve_tree(b, values)?),
        ),
        Expr::Not(a) => ProbeFilter::Not(Box::new(resolve_tree(a, values)?)),
        Expr::Cmp(l, op, r) => ProbeFilter::Test(resolve_cmp(l, *op, r, values)?),
    })
}

fn is_value(o: &Operand) -> bool {
    matches!(o, Operand::Name(_) | Operand::Tid | Operand::Comm)
}

fn resolve_cmp(
    l: &Operand,
    op: CmpOp,
    r: &Operand,
    values: &[(String, String, FieldKind)],
) -> std::result::Result<Test, String> {
    let text = format!("{l} {} {r}", op.as_str());
    let (subject, op, constant) = match (is_value(l), is_value(r)) {
        (true, false) => (l, op, r),
        (false, true) => match op.flipped() {
            Some(f) => (r, f, l),
            None => return Err(format!("`{text}`: write the value on the left of ~ (NAME ~ \"GLOB\")")),
        },
        (true, true) => {
            return Err(format!(
                "`{text}` compares two values; filters compare a value with a constant (a kernel filter has no field-to-field comparison)"
            ))
        }
        (false, false) => {
            return Err(format!(
                "`{text}` compares two constants; name an argument, $tid or $comm"
            ))
        }
    };
    let value = match constant {
        Operand::Int(v) => Constant::Int(*v),
        Operand::Str(s) => Constant::Str(s.clone()),
        _ => unreachable!("checked above: the constant side is a literal"),
    };
    let subject = match subject {
        Operand::Tid => Subject::Tid,
        Operand::Comm => Subject::Comm,
        Operand::Name(n) => {
            let (arg, field, kind) = values
                .iter()
                .find(|(a, _, _)| a == n)
                .cloned()
                .ok_or_else(|| format!("no value {n}"))?;
            Subject::Field { arg, field, kind }
        }
        _ => unreachable!("checked above: the value side is a value"),
    };
    let is_string = match &subject {
        Subject::Tid => false,
        Subject::Comm => true,
        Subject::Field { kind, .. } => match kind {
            FieldKind::Int(_) => false,
            FieldKind::CString | FieldKind::Utf16 | FieldKind::GoString => true,
            // The backend knows a raw fetch's type; the constant says what the user meant.
            FieldKind::Raw => matches!(value, Constant::Str(_)),
        },
    };
    let name = match &subject {
        Subject::Tid => "$tid".to_string(),
        Subject::Comm => "$comm".to_string(),
        Subject::Field { arg, .. } => arg.clone(),
    };
    match (&value, is_string) {
        (_, false) if op == CmpOp::Glob => {
            return Err(format!(
                "`{text}`: ~ (glob) matches strings; {name} is a number"
            ))
        }
        (Constant::Str(_), false) => {
            return Err(format!(
                "`{text}`: {name} is a number; compare it with a number"
            ))
        }
        (Constant::Int(_), true) => {
            return Err(format!(
                "`{text}`: {name} is a string; compare it with a quoted string"
            ))
        }
        (Constant::Str(_), true) if !matches!(op, CmpOp::Eq | CmpOp::Ne | CmpOp::Glob) => {
            return Err(format!(
                "`{text}`: strings compare with ==, != and ~ (glob) only"
            ))
        }
        _ => {}
    }
    if let (
        Constant::Int(v),
        Subject::Field {
            kind: FieldKind::Int(t),
            ..
        },
    ) = (&value, &subject)
    {
        let (lo, hi) = int_range(*t);
        if *v < lo || *v > hi {
            return Err(format!(
                "`{text}`: {name} is {} ({lo}..={hi}), so {v} can never be its value",
                t.name()
            ));
        }
    }
    if let (Constant::Int(v), Subject::Tid) = (&value, &subject) {
        if *v < 0 || *v > i32::MAX as i128 {
            return Err(format!("`{text}`: {v} is not a thread id"));
        }
    }
    Ok(Test { subject, op, value })
}
/// Resolves `filter` against every probe of `plan` and stores the result in each probe
/// ([`KernelProbe::filter`]). Per function: the probes that read every value the filter names
/// get it; a return probe when the filter names only entry arguments (or an entry probe when it
/// names only `ret`) stays unfiltered, said in the plan's notes; a filter that names no value
/// of any probe of the function, or a comparison that cannot be made, is a usage error that
/// lists the function's values.
///
/// `task` (`--tid`, `--comm`: names no argument) applies to every probe, joined with the rest
/// by `&&`.
pub fn apply_filter(plan: &mut ProbePlan, user: Option<&Expr>, task: Option<&Expr>) -> Result<()> {
    if let Some(user) = user {
        apply_user(plan, user)?;
    }
    let Some(task) = task else {
        return Ok(());
    };
    for p in &mut plan.probes {
        let r = match resolve(task, p) {
            Ok(r) => r,
            Err(Unresolved::Refused(why)) => return Err(Error::usage(why)),
            Err(Unresolved::Missing(m)) => {
                return Err(Error::usage(format!(
                    "the thread filter names arguments ({})",
                    m.join(", ")
                )))
            }
        };
        p.filter = Some(match p.filter.take() {
            Some(f) => ProbeFilter::And(Box::new(f), Box::new(r)),
            None => r,
        });
    }
    Ok(())
}

fn apply_user(plan: &mut ProbePlan, filter: &Expr) -> Result<()> {
    let names = filter.names();
    let mut resolved = Vec::new();
    // Functions whose probes see the other end of the call only, with the role they have.
    let mut unfiltered: Vec<(String, Role)> = Vec::new();
    for (i, p) in plan.probes.iter().enumerate() {
        let fname = &plan.function(p.function).name;
        match resolve(filter, p) {
            Ok(r) => resolved.push((i, r)),
            Err(Unresolved::Refused(why)) => {
                return Err(Error::usage(format!("--filter on {fname}: {why}")))
            }
            Err(Unresolved::Missing(m)) => {
                // A return probe when the filter names only entry arguments, or an entry probe
                // when it names only `ret`: the filter is about the other end of the call.
                let other_end = m.len() == names.len()
                    && match p.role {
                        Role::Return => !names.iter().any(|n| n == "ret"),
                        Role::Entry => names.iter().all(|n| n == "ret"),
                    };
                if !other_end {
                    return Err(not_an_argument(plan, p.function, &m, &names));
                }
                if !unfiltered.iter().any(|(f, r)| f == fname && *r == p.role) {
                    unfiltered.push((fname.clone(), p.role));
                }
            }
        }
    }
    if resolved.is_empty() {
        let first = plan.probes.first().map(|p| p.function);
        return Err(match first {
            Some(f) => not_an_argument(plan, f, &names, &names),
            None => Error::usage("--filter: nothing to filter"),
        });
    }
    for (i, r) in resolved {
        plan.probes[i].filter = Some(r);
    }
    for (fname, role) in unfiltered {
        let (which, names_of) = match role {
            Role::Return => ("returns", "only entry arguments"),
            Role::Entry => ("entries", "only the return value"),
        };
        plan.notes.push(format!(
            "--filter names {names_of} of {fname}, so its {which} are not filtered"
        ));
    }
    Ok(())
}

/// The usage error for a filter naming `missing`, which function `f`'s probes do not read all
/// of: what it names, and the values its probes read.
fn not_an_argument(plan: &ProbePlan, f: FunctionId, missing: &[String], names: &[String]) -> Error {
    let fname = &plan.function(f).name;
    let probes: Vec<&KernelProbe> = plan.probes.iter().filter(|p| p.function == f).collect();
    let mut known: Vec<String> = Vec::new();
    for p in &probes {
        for (a, _, kind) in probe_values(p) {
            let label = format!("{a} ({})", kind_label(kind));
            if !known.contains(&label) {
                known.push(label);
            }
        }
    }
    let every_name_known = names.iter().all(|n| {
        probes
            .iter()
            .any(|p| probe_values(p).iter().any(|(a, _, _)| a == n))
    });
    if every_name_known {
        return Error::usage(format!(
            "--filter names {} together, but no probe of {fname} reads them all (an entry probe reads the arguments, a return probe ret): filter the entry arguments or ret, not both",
            names.join(", ")
        ));
    }
    let missing = missing.join(", ");
    Error::usage(if known.is_empty() {
        format!(
            "--filter names {missing}, but netprobe reads no arguments of {fname}: declare them in the probe spec (e.g. '{fname} s32' for arg0, or 'n=s64'), or filter on $tid/$comm"
        )
    } else {
        format!(
            "--filter names {missing}, which is no argument of {fname}; its values: {}",
            known.join(", ")
        )
    })
}

fn kind_label(k: FieldKind) -> String {
    match k {
        FieldKind::Int(t) => t.name().to_string(),
        FieldKind::CString => "string".into(),
        FieldKind::Utf16 => ".NET string".into(),
        FieldKind::GoString => "Go string".into(),
        FieldKind::Raw => "raw fetch-arg".into(),
    }
}
