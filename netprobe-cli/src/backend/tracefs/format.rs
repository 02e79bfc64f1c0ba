//! The `format` files that describe binary records: `events/header_page` (the ring-buffer page
//! header) and `events/GROUP/EVENT/format` (one event's fields). Kernel
//! `Documentation/trace/events.rst` ("Event formats"); the field line syntax is
//! `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;` where NAME may end in `[LEN]` (array) and TYPE
//! may start with `__data_loc` (a 32-bit word: low 16 bits offset of the data inside the record,
//! high 16 bits its length) or `__rel_loc` (same, offset relative to the end of the word).

use crate::error::{Error, Result};

/// How a field's bytes are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A plain integer of `size` bytes.
    Scalar,
    /// `__data_loc`: a u32 locating variable-length data inside the record.
    DataLoc,
    /// `__rel_loc`: like `DataLoc`, offset counted from the end of the u32.
    RelLoc,
    /// A fixed array; `size` is the total, `len` the element count.
    Array { len: usize },
}

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as printed (`s32`, `unsigned long`, `u16`, `__data_loc char[]`).
    pub c_type: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

/// A parsed `events/GROUP/EVENT/format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    /// The event id: the `common_type` every record of this event starts with.
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// Parses a format file. Fails when `name:`/`ID:` is missing; field lines that do not parse are
    /// skipped (a new kernel may add attributes) rather than guessed at.
    pub fn parse(text: &str) -> Result<EventFormat> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = t.strip_prefix("ID:") {
                id = v.trim().parse::<u16>().ok();
            } else if t.starts_with("field:") {
                if let Some(f) = parse_field(t) {
                    fields.push(f);
                }
            }
        }
        match (name, id) {
            (Some(name), Some(id)) => Ok(EventFormat { name, id, fields }),
            _ => Err(Error::BadPage(
                "event format file without name: or ID: line".into(),
            )),
        }
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`; `None` if any part is missing.
fn parse_field(line: &str) -> Option<Field> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts.next()?.strip_prefix("field:")?.trim();
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let (c_type, mut name) = decl.rsplit_once(' ')?;
    let c_type = c_type.trim().to_string();
    let size: usize = size?;
    let mut kind = if c_type.starts_with("__data_loc") {
        FieldKind::DataLoc
    } else if c_type.starts_with("__rel_loc") {
        FieldKind::RelLoc
    } else {
        FieldKind::Scalar
    };
    if let Some((base, rest)) = name.split_once('[') {
        let inside = rest.strip_suffix(']')?;
        // Probe events declare array fetch-args without a length (`u16 w[];  size:8`, seen on
        // 6.1, 6.12 and 6.18): the count is the size over the element's size.
        let len: usize = if inside.is_empty() {
            size / elem_size(&c_type)?
        } else {
            inside.parse().ok()?
        };
        name = base;
        if kind == FieldKind::Scalar {
            kind = FieldKind::Array { len };
        }
    }
    Some(Field {
        name: name.to_string(),
        c_type,
        offset: offset?,
        size,
        signed,
        kind,
    })
}

/// Size in bytes of one element of an array field of C type `c_type` (the probe fetch types and
/// the C names the kernel prints for fixed arrays); `None` when unknown.
fn elem_size(c_type: &str) -> Option<usize> {
    let t = c_type.trim();
    let bits = t
        .strip_prefix('u')
        .or_else(|| t.strip_prefix('s'))
        .or_else(|| t.strip_prefix('x'))
        .and_then(|b| b.parse::<usize>().ok());
    match (t, bits) {
        (_, Some(b @ (8 | 16 | 32 | 64))) => Some(b / 8),
        ("char" | "unsigned char" | "signed char", _) => Some(1),
        ("short" | "unsigned short", _) => Some(2),
        ("int" | "unsigned int", _) => Some(4),
        ("long" | "unsigned long", _) => Some(8),
        _ => None,
    }
}

/// Where the parts of a ring-buffer page header are, from `events/header_page`:
/// ```text
/// field: u64 timestamp;  offset:0;  size:8;  signed:0;
/// field: local_t commit; offset:8;  size:8;  signed:1;
/// field: char data;      offset:16; size:4080; signed:0;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    /// 8 on 64-bit kernels (`local_t` is a long), 4 on 32-bit ones.
    pub commit_size: usize,
    pub data_offset: usize,
    /// Bytes of a whole page (or sub-buffer) as read from `trace_pipe_raw`.
    pub page_size: usize,
}

impl PageLayout {
    /// Parses `header_page`; `page_size` is the sub-buffer size actually read (see
    /// `buffer_subbuf_size_kb`; `header_page` describes the default 4 KiB page).
    pub fn parse(text: &str, page_size: Option<usize>) -> Result<PageLayout> {
        let mut ts = None;
        let mut commit = None;
        let mut data = None;
        for line in text.lines() {
            let t = line.trim();
            if !t.starts_with("field:") {
                continue;
            }
            // header_page writes "field: u64 timestamp;" with a space after the colon.
            let Some(f) = parse_field(&t.replacen("field: ", "field:", 1)) else {
                continue;
            };
            match f.name.as_str() {
                "timestamp" => ts = Some(f),
                "commit" => commit = Some(f),
                "data" => data = Some(f),
                _ => {}
            }
        }
        match (ts, commit, data) {
            (Some(ts), Some(commit), Some(data)) => {
                let default_size = data.offset.saturating_add(data.size);
                Ok(PageLayout {
                    timestamp_offset: ts.offset,
                    commit_offset: commit.offset,
                    commit_size: commit.size,
                    data_offset: data.offset,
                    page_size: page_size.unwrap_or(default_size),
                })
            }
            _ => Err(Error::BadPage(
                "events/header_page lacks timestamp, commit or data".into(),
            )),
        }
    }

    /// The layout of x86_64 kernels with 4 KiB pages (what `header_page` says on this machine).
    pub const X86_64: PageLayout = PageLayout {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        page_size: 4096,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const ADD_FORMAT: &str = "name: add\nID: 2326\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:s32 a;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:u64 b;\toffset:20;\tsize:8;\tsigned:0;\n\tfield:__data_loc char[] s;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:u16 chars[];\toffset:32;\tsize:128;\tsigned:0;\n\nprint fmt: \"(%lx) a=%d\", REC->__probe_ip, REC->a\n";

    /// The format file the kernel writes for `w=+0(%dx):u16[4]` (6.18 here; the harness saw the
    /// same on 6.1 and 6.12): no length inside the brackets.
    #[test]
    fn array_fetch_arg_without_length() {
        let f = parse_field("\tfield:u16 w[];\toffset:16;\tsize:8;\tsigned:0;").unwrap();
        assert_eq!(
            (f.name.as_str(), f.offset, f.kind),
            ("w", 16, FieldKind::Array { len: 4 })
        );
        let f = parse_field("\tfield:u8 b[];\toffset:16;\tsize:64;\tsigned:0;").unwrap();
        assert_eq!(f.kind, FieldKind::Array { len: 64 });
    }

    #[test]
    fn parses_uprobe_format() {
        let f = EventFormat::parse(ADD_FORMAT).unwrap();
        assert_eq!(f.name, "add");
        assert_eq!(f.id, 2326);
        let a = f.field("a").unwrap();
        assert_eq!((a.offset, a.size, a.signed), (16, 4, true));
        assert_eq!(f.field("s").unwrap().kind, FieldKind::DataLoc);
        let c = f.field("chars").unwrap();
        assert_eq!(c.kind, FieldKind::Array { len: 64 });
        assert_eq!((c.offset, c.size), (32, 128));
        assert_eq!(f.field("common_pid").unwrap().offset, 4);
    }

    #[test]
    fn parses_header_page() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(PageLayout::parse(text, None).unwrap(), PageLayout::X86_64);
        assert_eq!(PageLayout::parse(text, Some(8192)).unwrap().page_size, 8192);
        assert!(PageLayout::parse("", None).is_err());
    }

    proptest::proptest! {
        #[test]
        fn format_parsers_never_panic(s in ".*") {
            let _ = EventFormat::parse(&s);
            let _ = PageLayout::parse(&s, None);
        }
    }
}
