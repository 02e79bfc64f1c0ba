//! Records of a tracefs session decoded into the plan's [`Hit`]s: fields found by the event's
//! `format` file (kernel `Documentation/trace/events.rst`, "Event formats"), strings as
//! `__data_loc`/`__rel_loc`, arrays as inline elements. Bounds-checked: a short or hostile record
//! decodes what is there, or nothing, and never panics.

use super::fetch;
use super::fetch::{ArrayElem, FetchType};
use super::format::{EventFormat, Field, FieldKind};
use crate::plan::{Decode, Hit, KernelProbe, ProbePlan, Value};
use netprobe_core::abi::IntType;

/// Decodes one record of probe `probe` of `plan` (whose event format is `format`) into a hit.
/// `None` when the record is too short for the common header (never a panic).
pub fn decode(
    plan: &ProbePlan,
    probe: usize,
    format: &EventFormat,
    ts: u64,
    data: &[u8],
) -> Option<Hit> {
    let kp = plan.probes.get(probe)?;
    let tid = read_field_int(format.field("common_pid")?, data)? as u32;
    let mut args = Vec::with_capacity(kp.args.len());
    for a in &kp.args {
        args.push((a.name.clone(), decode_arg(kp, &a.decode, format, data)));
    }
    let pair_key = match &kp.pair_field {
        Some(f) => format
            .field(f)
            .and_then(|f| read_field_int(f, data))
            .unwrap_or(0),
        None => tid as u64,
    };
    let comm = kp.comm_field.as_ref().and_then(|f| {
        let field = format.field(f)?;
        match read_data_loc(field, data)? {
            [] => None,
            bytes => Some(c_string(bytes).0),
        }
    });
    Some(Hit {
        ts_ns: ts,
        tid,
        pid: None,
        probe,
        function: kp.function,
        role: kp.role,
        args,
        pair_key,
        comm,
        user_stack: None,
    })
}

/// The return address a probe read at the stack pointer (`KernelProbe::return_address_field`),
/// when it reads one.
pub fn return_address(kp: &KernelProbe, format: &EventFormat, data: &[u8]) -> Option<u64> {
    let field = format.field(kp.return_address_field.as_deref()?)?;
    read_field_int(field, data)
}

/// A record of the kernel's `ftrace/user_stack` event (the `userstacktrace` option): the task,
/// and the return addresses its frame-pointer walk found, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStackRecord {
    /// `common_pid`: the thread.
    pub tid: u32,
    /// `tgid`: its process.
    pub pid: u32,
    /// `caller[]` up to the first zero entry.
    pub addrs: Vec<u64>,
    /// Every entry of `caller[]` was filled: the walk may have gone on.
    pub full: bool,
}

/// Decodes a `user_stack` record by its format (kernel `kernel/trace/trace_entries.h`,
/// `FTRACE_ENTRY(user_stack, userstack_entry, ...)`: `tgid`, then `caller[FTRACE_STACK_ENTRIES]`,
/// zero after the last frame, filled by `ftrace_trace_userstack` in `kernel/trace/trace.c`).
/// `None` when a field is missing or the record is short.
pub fn user_stack(format: &EventFormat, data: &[u8]) -> Option<UserStackRecord> {
    let tid = read_field_int(format.field("common_pid")?, data)? as u32;
    let pid = read_field_int(format.field("tgid")?, data)? as u32;
    let caller = format.field("caller")?;
    let FieldKind::Array { len } = caller.kind else {
        return None;
    };
    let elem = caller.size.checked_div(len).filter(|&e| e == 8 || e == 4)?;
    let mut addrs = Vec::with_capacity(len);
    for i in 0..len {
        let a = read_le(data, caller.offset.checked_add(i.checked_mul(elem)?)?, elem)?;
        if a == 0 {
            break;
        }
        addrs.push(a);
    }
    let full = addrs.len() == len;
    Some(UserStackRecord {
        tid,
        pid,
        addrs,
        full,
    })
}

fn read_le(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = data.get(offset..offset.checked_add(size)?)?;
    let mut buf = [0u8; 8];
    buf.get_mut(..size)?.copy_from_slice(b);
    Some(u64::from_le_bytes(buf))
}

/// An integer field's raw value (zero-extended).
fn read_field_int(field: &Field, data: &[u8]) -> Option<u64> {
    if !(1..=8).contains(&field.size) {
        return None;
    }
    read_le(data, field.offset, field.size)
}

/// The bytes a `__data_loc`/`__rel_loc` field points to.
fn read_data_loc<'a>(field: &Field, data: &'a [u8]) -> Option<&'a [u8]> {
    let word = read_le(data, field.offset, 4)? as u32;
    let len = (word >> 16) as usize;
    let mut off = (word & 0xffff) as usize;
    if field.kind == FieldKind::RelLoc {
        off = off.checked_add(field.offset + 4)?;
    }
    data.get(off..off.checked_add(len)?)
}

/// Text of a C string field (up to the first NUL), lossily decoded; and whether a NUL was found.
fn c_string(bytes: &[u8]) -> (String, bool) {
    match bytes.iter().position(|&b| b == 0) {
        Some(n) => (String::from_utf8_lossy(&bytes[..n]).into_owned(), true),
        None => (String::from_utf8_lossy(bytes).into_owned(), false),
    }
}

fn int_value(raw: u64, ty: IntType) -> Value {
    let sign = |bits: u32| {
        let shift = 64 - bits;
        Value::Signed(((raw << shift) as i64) >> shift)
    };
    match ty {
        t if t.is_signed() => sign(t.bits()),
        t if t.is_hex() => Value::Hex(raw),
        _ => Value::Unsigned(raw),
    }
}

fn decode_arg(p: &KernelProbe, d: &Decode, format: &EventFormat, data: &[u8]) -> Value {
    match d {
        Decode::Raw { field } => match fetch::field_type(p, field) {
            Some(FetchType::String) => decode_arg(
                p,
                &Decode::CString {
                    field: field.clone(),
                },
                format,
                data,
            ),
            Some(FetchType::Array { elem, .. }) => decode_array(
                field,
                match elem {
                    ArrayElem::U8 => 1,
                    ArrayElem::U16 => 2,
                },
                format,
                data,
            ),
            Some(FetchType::Int(ty)) => decode_arg(
                p,
                &Decode::Int {
                    field: field.clone(),
                    ty,
                },
                format,
                data,
            ),
            None => Value::Fault,
        },
        Decode::Int { field, ty } => format
            .field(field)
            .and_then(|f| read_field_int(f, data))
            .map(|raw| int_value(raw, *ty))
            .unwrap_or(Value::Fault),
        Decode::CString { field } => match format.field(field).and_then(|f| read_data_loc(f, data))
        {
            // The kernel stores a zero-length string when it could not read the memory.
            None | Some([]) => Value::Fault,
            Some(bytes) => Value::Str {
                text: c_string(bytes).0,
                truncated: false,
                length: None,
            },
        },
        Decode::Utf16 {
            len_field,
            chars_field,
        } => {
            let len = format
                .field(len_field)
                .and_then(|f| read_field_int(f, data))
                .map(|raw| raw as u32 as i32);
            let chars = format.field(chars_field).and_then(|f| {
                let FieldKind::Array { len } = f.kind else {
                    return None;
                };
                let b = data.get(f.offset..f.offset.checked_add(len.checked_mul(2)?)?)?;
                Some(
                    b.chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .collect::<Vec<u16>>(),
                )
            });
            match (len, chars) {
                (Some(n), Some(units)) if n >= 0 => {
                    let take = (n as usize).min(units.len());
                    Value::Str {
                        text: String::from_utf16_lossy(&units[..take]),
                        truncated: (n as usize) > units.len(),
                        length: Some(n as i64),
                    }
                }
                _ => Value::Fault,
            }
        }
        Decode::GoString {
            bytes_field,
            len_field,
        } => {
            let len = format
                .field(len_field)
                .and_then(|f| read_field_int(f, data))
                .map(|raw| raw as i64);
            let bytes = format.field(bytes_field).and_then(|f| {
                let FieldKind::Array { len } = f.kind else {
                    return None;
                };
                data.get(f.offset..f.offset.checked_add(len)?)
            });
            match (len, bytes) {
                (Some(n), Some(b)) if n >= 0 => {
                    let take = (n as usize).min(b.len());
                    Value::Str {
                        text: String::from_utf8_lossy(&b[..take]).into_owned(),
                        truncated: (n as usize) > b.len(),
                        length: Some(n),
                    }
                }
                _ => Value::Fault,
            }
        }
    }
}

/// A `u8[N]`/`u16[N]` field: every element.
fn decode_array(field: &str, elem_size: usize, format: &EventFormat, data: &[u8]) -> Value {
    format
        .field(field)
        .and_then(|f| {
            let FieldKind::Array { len } = f.kind else {
                return None;
            };
            let bytes = data.get(f.offset..f.offset.checked_add(len.checked_mul(elem_size)?)?)?;
            Some(Value::List(
                bytes
                    .chunks_exact(elem_size)
                    .map(|c| read_le(c, 0, elem_size).unwrap_or(0))
                    .collect(),
            ))
        })
        .unwrap_or(Value::Fault)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tracefs::fetch::tests::{c_function, pos};
    use crate::plan::Returns;
    use netprobe_core::abi::ValueType;

    /// A record laid out as the kernel formats the probe's fields.
    #[test]
    fn decodes_records() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(
            vec![
                pos("a", ValueType::Int(IntType::S32)),
                pos("b", ValueType::Int(IntType::X64)),
                pos("s", ValueType::CString),
                pos("name", ValueType::DotnetString),
            ],
            Returns::None,
        ))
        .unwrap();
        let fmt = EventFormat::parse("name: add\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:s32 a;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:u64 b;\toffset:20;\tsize:8;\tsigned:0;\n\tfield:__data_loc char[] s;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:s32 name_len;\toffset:32;\tsize:4;\tsigned:1;\n\tfield:u16 name[];\toffset:36;\tsize:128;\tsigned:0;\n").unwrap();
        let mut rec = vec![0u8; 164];
        rec[0..2].copy_from_slice(&7u16.to_le_bytes());
        rec[4..8].copy_from_slice(&4242i32.to_le_bytes());
        rec[16..20].copy_from_slice(&(-5i32).to_le_bytes());
        rec[20..28].copy_from_slice(&0xabcu64.to_le_bytes());
        rec[32..36].copy_from_slice(&70i32.to_le_bytes());
        for (i, c) in "héllo"
            .encode_utf16()
            .chain(std::iter::repeat(b'x' as u16))
            .take(64)
            .enumerate()
        {
            rec[36 + 2 * i..38 + 2 * i].copy_from_slice(&c.to_le_bytes());
        }
        let s_off = rec.len() as u32;
        rec.extend_from_slice(b"hey\0");
        rec[28..32].copy_from_slice(&((4u32 << 16) | s_off).to_le_bytes());
        let hit = decode(&plan, 0, &fmt, 99, &rec).unwrap();
        assert_eq!(hit.tid, 4242);
        assert_eq!(hit.pair_key, 4242);
        assert_eq!(hit.args[0].1, Value::Signed(-5));
        assert_eq!(hit.args[1].1, Value::Hex(0xabc));
        assert_eq!(hit.args[2].1.to_string(), "\"hey\"");
        match &hit.args[3].1 {
            Value::Str {
                text,
                truncated,
                length,
            } => {
                assert!(text.starts_with("héllo"));
                assert_eq!(text.chars().count(), 64);
                assert!(*truncated);
                assert_eq!(*length, Some(70));
            }
            v => panic!("{v:?}"),
        }
        // A zero-length string is the kernel's fault marker.
        rec[28..32].copy_from_slice(&(s_off).to_le_bytes());
        assert_eq!(
            decode(&plan, 0, &fmt, 99, &rec).unwrap().args[2].1,
            Value::Fault
        );
        // Short records decode what is there and never panic.
        for n in 0..rec.len() {
            let _ = decode(&plan, 0, &fmt, 0, &rec[..n]);
        }
    }

    /// The `ftrace/user_stack` format as this kernel prints it.
    const USER_STACK_FORMAT: &str = "name: user_stack\nID: 13\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n";

    fn user_stack_record(tid: u32, pid: u32, addrs: &[u64]) -> Vec<u8> {
        let mut rec = vec![0u8; 80];
        rec[0..2].copy_from_slice(&13u16.to_le_bytes());
        rec[4..8].copy_from_slice(&tid.to_le_bytes());
        rec[8..12].copy_from_slice(&pid.to_le_bytes());
        for (i, a) in addrs.iter().enumerate() {
            rec[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        rec
    }

    #[test]
    fn user_stack_records_stop_at_zero_and_say_when_full() {
        let fmt = EventFormat::parse(USER_STACK_FORMAT).unwrap();
        let r = user_stack(&fmt, &user_stack_record(11, 10, &[0x1139, 0x1176, 0x11c1])).unwrap();
        assert_eq!((r.tid, r.pid), (11, 10));
        assert_eq!(r.addrs, vec![0x1139, 0x1176, 0x11c1]);
        assert!(!r.full);
        let all: Vec<u64> = (1..=8).collect();
        let r = user_stack(&fmt, &user_stack_record(11, 10, &all)).unwrap();
        assert_eq!(r.addrs, all);
        assert!(r.full);
        // Short records decode nothing and never panic.
        let rec = user_stack_record(1, 1, &all);
        for n in 0..rec.len() {
            assert!(user_stack(&fmt, &rec[..n]).is_none());
        }
    }

    proptest::proptest! {
        #[test]
        fn hostile_user_stack_records_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            let fmt = EventFormat::parse(USER_STACK_FORMAT).unwrap();
            if let Some(r) = user_stack(&fmt, &bytes) {
                proptest::prop_assert!(r.addrs.len() <= 8);
                proptest::prop_assert!(r.addrs.iter().all(|&a| a != 0));
            }
        }
    }
}
