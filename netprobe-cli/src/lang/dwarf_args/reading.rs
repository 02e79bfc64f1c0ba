//! How one parameter is read: its type and location at the probe point turned into
//! [`ArgRequest::Located`] values (integers, strings, a Go string's or Rust `&str`'s pointer and
//! length, a slice header's three words, a struct's fields), each word a register or memory at a
//! register plus an offset, or the reason it is not read (see the parent module's doc).

use crate::plan::ArgRequest;
use netprobe_core::abi::{ArgLocation, IntType, ValueType};
use netprobe_core::debuginfo::{Location, Param, ParamType, Place};

/// What netprobe does with one parameter: the values it reads (a struct or slice gives
/// several), and what it does not read and why (the whole parameter, or some fields).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reading {
    pub values: Vec<ArgRequest>,
    pub not_read: Option<String>,
}

/// A fetch-arg name for a source name, unique among `taken` (which it joins).
fn unique_name(wanted: &str, taken: &mut Vec<String>, extra_fields: &[&str]) -> String {
    let base = netprobe_core::abi::dotnet::args::field_name(wanted, "arg");
    let mut name = base.clone();
    let mut k = 2;
    let clash = |n: &str, taken: &Vec<String>| {
        std::iter::once(n.to_string())
            .chain(extra_fields.iter().map(|s| format!("{n}{s}")))
            .any(|f| taken.contains(&f))
    };
    while clash(&name, taken) {
        name = format!("{base}_{k}");
        k += 1;
    }
    taken.push(name.clone());
    taken.extend(extra_fields.iter().map(|s| format!("{name}{s}")));
    name
}

fn int_type(bytes: u8, signed: bool) -> Option<IntType> {
    Some(match (bytes, signed) {
        (1, true) => IntType::S8,
        (2, true) => IntType::S16,
        (4, true) => IntType::S32,
        (8, true) => IntType::S64,
        (1, false) => IntType::U8,
        (2, false) => IntType::U16,
        (4, false) => IntType::U32,
        (8, false) => IntType::U64,
        _ => return None,
    })
}

/// The integer type a scalar parameter type is fetched as; `Err` says why it is not fetched.
fn scalar(ty: &ParamType) -> Result<(ValueType, u64), String> {
    let int = |bytes: u8, signed| {
        int_type(bytes, signed)
            .map(|t| (ValueType::Int(t), bytes as u64))
            .ok_or_else(|| format!("a {bytes}-byte integer"))
    };
    match ty {
        ParamType::Int { bytes, signed, .. } => int(*bytes, *signed),
        ParamType::Bool { bytes, .. } => int(*bytes, false),
        ParamType::Char { signed, .. } => int(1, *signed),
        ParamType::Pointer { .. } => Ok((ValueType::Int(IntType::X64), 8)),
        ParamType::CString { .. } => Ok((ValueType::CString, 8)),
        ParamType::Float { .. } => {
            Err("a floating-point value (fetch-args read integer registers and memory only)".into())
        }
        ParamType::Other { why, .. } => Err(why.clone()),
        ParamType::PtrLen { .. } | ParamType::Slice { .. } | ParamType::Struct { .. } => {
            Err("a struct inside a struct".into())
        }
    }
}

/// Where the `size` bytes at byte `offset` of a value located by `pieces` are, as one fetchable
/// location.
fn word_at(location: &Location, offset: u64, size: u64) -> Result<ArgLocation, String> {
    let pieces = match location {
        Location::Pieces(p) => p,
        Location::Unreadable(why) => return Err(why.clone()),
    };
    let mut start = 0u64;
    for p in pieces {
        let len = p.bytes.unwrap_or(u64::MAX);
        if offset >= start && offset - start < len {
            let within = offset - start;
            if size > len.saturating_sub(within) {
                return Err("it spans two pieces of its location".into());
            }
            return match p.place {
                Place::Register(r) if within == 0 && size <= 8 => Ok(ArgLocation::Register(r)),
                Place::Register(r) => Err(format!(
                    "in the upper bytes of %{r}, which fetch-args cannot shift out"
                )),
                Place::Memory { base, offset: o } => {
                    let o = i64::try_from(within)
                        .ok()
                        .and_then(|w| o.checked_add(w))
                        .ok_or("an offset out of range")?;
                    Ok(ArgLocation::Register(base).deref(o))
                }
                Place::OptimizedOut => Err("optimized out (this part of it)".into()),
            };
        }
        start = start.saturating_add(len);
    }
    Err("its location is shorter than its type".into())
}

/// How one parameter is read, its names joining `taken`.
pub(super) fn reading(p: &Param, taken: &mut Vec<String>) -> Reading {
    match reading_of(p, taken) {
        Ok(r) => r,
        Err(why) => Reading {
            values: vec![],
            not_read: Some(why),
        },
    }
}

fn read_all(values: Vec<ArgRequest>) -> Result<Reading, String> {
    Ok(Reading {
        values,
        not_read: None,
    })
}

fn reading_of(p: &Param, taken: &mut Vec<String>) -> Result<Reading, String> {
    let loc = &p.location;
    if let Location::Unreadable(why) = loc {
        return Err(why.clone());
    }
    let located = |name: String, ty: ValueType, words: Vec<ArgLocation>| ArgRequest::Located {
        name,
        ty,
        words,
    };
    match &p.ty {
        ParamType::PtrLen { .. } => {
            let words = vec![word_at(loc, 0, 8)?, word_at(loc, 8, 8)?];
            let name = unique_name(&p.name, taken, &["_len"]);
            read_all(vec![located(name, ValueType::GoString, words)])
        }
        ParamType::Slice { .. } => {
            let words = [
                word_at(loc, 0, 8)?,
                word_at(loc, 8, 8)?,
                word_at(loc, 16, 8)?,
            ];
            let base = unique_name(&p.name, taken, &["_ptr", "_len", "_cap"]);
            taken.retain(|t| *t != base);
            read_all(
                ["_ptr", "_len", "_cap"]
                    .iter()
                    .zip(words)
                    .map(|(suffix, w)| {
                        let ty = if *suffix == "_ptr" {
                            IntType::X64
                        } else {
                            IntType::S64
                        };
                        located(format!("{base}{suffix}"), ValueType::Int(ty), vec![w])
                    })
                    .collect(),
            )
        }
        ParamType::Struct { fields, .. } => {
            let mut out = Vec::new();
            let mut why = Vec::new();
            for f in fields {
                match scalar(&f.ty).and_then(|(ty, size)| Ok((ty, word_at(loc, f.offset, size)?))) {
                    Ok((ty, at)) => {
                        let name = unique_name(&format!("{}_{}", p.name, f.name), taken, &[]);
                        out.push(located(name, ty, vec![at]));
                    }
                    Err(w) => why.push(format!("field {}: {w}", f.name)),
                }
            }
            if out.is_empty() && why.is_empty() {
                return Err("a struct without fields".into());
            }
            if out.is_empty() {
                return Err(why.join(", "));
            }
            Ok(Reading {
                values: out,
                not_read: (!why.is_empty()).then(|| why.join(", ")),
            })
        }
        ty => {
            let (vt, size) = scalar(ty)?;
            let at = word_at(loc, 0, size)?;
            let name = unique_name(&p.name, taken, &[]);
            read_all(vec![located(name, vt, vec![at])])
        }
    }
}

/// `%di`, `+8(%sp)`, `-20(%bp)`: a location as the kernel's fetch-args write it.
pub fn describe_location(at: &ArgLocation) -> String {
    match at {
        ArgLocation::Register(r) => format!("%{r}"),
        ArgLocation::EntryStack { offset } => format!("+{offset}(%sp)"),
        ArgLocation::ReturnValue => "$retval".into(),
        ArgLocation::Deref { base, offset } => {
            let b = describe_location(base);
            if *offset < 0 {
                format!("{offset}({b})")
            } else {
                format!("+{offset}({b})")
            }
        }
    }
}

/// A parameter's location in words: `%di`, `%ax+%bx` (pieces), `-20(%bp)`.
pub fn describe_param_location(location: &Location) -> String {
    match location {
        Location::Unreadable(_) => "-".into(),
        Location::Pieces(pieces) => pieces
            .iter()
            .map(|p| match p.place {
                Place::Register(r) => format!("%{r}"),
                Place::Memory { base, offset } => {
                    describe_location(&ArgLocation::Register(base).deref(offset))
                }
                Place::OptimizedOut => "(optimized out)".into(),
            })
            .collect::<Vec<_>>()
            .join("+"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netprobe_core::abi::Register;
    use netprobe_core::debuginfo::{Field, Piece};

    fn pieces(p: &[(Option<u64>, Place)]) -> Location {
        Location::Pieces(
            p.iter()
                .map(|&(bytes, place)| Piece { bytes, place })
                .collect(),
        )
    }

    fn param(name: &str, ty: ParamType, location: Location) -> Param {
        Param {
            name: name.into(),
            ty,
            location,
        }
    }

    fn located(r: &Reading) -> Vec<(String, ValueType, Vec<String>)> {
        r.values
            .iter()
            .map(|a| match a {
                ArgRequest::Located { name, ty, words } => (
                    name.clone(),
                    *ty,
                    words.iter().map(describe_location).collect(),
                ),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    const DI: Place = Place::Register(Register::Di);

    #[test]
    fn a_go_string_in_two_registers_is_pointer_and_length() {
        let p = param(
            "name",
            ParamType::PtrLen {
                name: "string".into(),
            },
            pieces(&[
                (Some(8), Place::Register(Register::Bx)),
                (Some(8), Place::Register(Register::Cx)),
            ]),
        );
        let r = reading(&p, &mut vec![]);
        assert_eq!(r.not_read, None);
        assert_eq!(
            located(&r),
            [(
                "name".into(),
                ValueType::GoString,
                vec!["%bx".into(), "%cx".into()]
            )]
        );
    }

    #[test]
    fn a_slice_in_memory_is_three_words_apart() {
        let mem = Place::Memory {
            base: Register::Sp,
            offset: 8,
        };
        let p = param(
            "v",
            ParamType::Slice {
                name: "[]int".into(),
            },
            pieces(&[(None, mem)]),
        );
        let r = reading(&p, &mut vec![]);
        let got: Vec<_> = located(&r).into_iter().map(|(n, _, w)| (n, w)).collect();
        assert_eq!(
            got,
            [
                ("v_ptr".to_string(), vec!["+8(%sp)".to_string()]),
                ("v_len".into(), vec!["+16(%sp)".into()]),
                ("v_cap".into(), vec!["+24(%sp)".into()]),
            ]
        );
    }

    #[test]
    fn struct_fields_in_the_upper_bytes_of_a_register_are_said_not_read() {
        let int = |n: &str| ParamType::Int {
            name: n.into(),
            bytes: 4,
            signed: true,
        };
        let ty = ParamType::Struct {
            name: "point".into(),
            bytes: 8,
            fields: vec![
                Field {
                    name: "x".into(),
                    offset: 0,
                    ty: int("int"),
                },
                Field {
                    name: "y".into(),
                    offset: 4,
                    ty: int("int"),
                },
            ],
        };
        let r = reading(&param("pt", ty, pieces(&[(None, DI)])), &mut vec![]);
        assert_eq!(
            located(&r),
            [(
                "pt_x".into(),
                ValueType::Int(IntType::S32),
                vec!["%di".into()]
            )]
        );
        assert!(r
            .not_read
            .unwrap()
            .contains("field y: in the upper bytes of %di"));
    }

    #[test]
    fn missing_pieces_floats_and_unreadable_locations_are_not_read() {
        let s = ParamType::PtrLen {
            name: "&str".into(),
        };
        let r = reading(
            &param(
                "t",
                s,
                pieces(&[(Some(8), Place::OptimizedOut), (Some(8), DI)]),
            ),
            &mut vec![],
        );
        assert!(r.values.is_empty());
        assert!(r.not_read.unwrap().contains("optimized out"));
        let f = ParamType::Float {
            name: "double".into(),
            bytes: 8,
        };
        let r = reading(&param("f", f, pieces(&[(None, DI)])), &mut vec![]);
        assert!(r.not_read.unwrap().contains("floating-point"));
        let i = ParamType::Int {
            name: "int".into(),
            bytes: 4,
            signed: true,
        };
        let r = reading(
            &param("i", i, Location::Unreadable("optimized out".into())),
            &mut vec![],
        );
        assert_eq!(r.not_read.as_deref(), Some("optimized out"));
    }

    #[test]
    fn names_are_fetch_arg_names_and_unique() {
        let mut taken = vec![];
        let ptr = || ParamType::Pointer {
            name: "void *".into(),
        };
        let names: Vec<String> = ["~p0", "x", "x", "common_pid", "np_pair"]
            .iter()
            .flat_map(|n| {
                located(&reading(
                    &param(n, ptr(), pieces(&[(None, DI)])),
                    &mut taken,
                ))
            })
            .map(|(n, _, _)| n)
            .collect();
        assert_eq!(names, ["_p0", "x", "x_2", "a_common_pid", "a_np_pair"]);
        // A string's length field is taken too.
        let s = ParamType::PtrLen {
            name: "string".into(),
        };
        let two = pieces(&[(Some(8), DI), (Some(8), DI)]);
        let mut taken = vec!["s_len".to_string()];
        let r = reading(&param("s", s, two), &mut taken);
        assert_eq!(located(&r)[0].0, "s_2");
    }
}
