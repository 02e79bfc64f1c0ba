//! The type grammar of a raw fetch-arg, the `FETCHARG:TYPE` users may write after `NAME=` in a
//! probe spec (`len=+8(%si):s32`): the kernel types netprobe fetches (kernel
//! `Documentation/trace/uprobetracer.rst`, "Types": `u8`..`x64`, `string`, arrays such as
//! `u16[64]`). The spec parser checks a raw argument's type here without naming a backend; the
//! tracefs backend writes these types into its probe lines (`backend/tracefs/fetch.rs`).

use netprobe_core::abi::IntType;

/// The kernel type of a fetched value (uprobetracer.rst, "Types").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FetchType {
    /// `u8`..`u64`, `s8`..`s64`, `x8`..`x64`.
    Int(IntType),
    /// A NUL-terminated string read from user memory (`+0(%di):string`); stored as `__data_loc`.
    String,
    /// A fixed array of `len` elements of an integer type, from memory: `u16[64]`. The kernel
    /// accepts at most 64 elements (65 is rejected here: "Array number is too big").
    Array { elem: ArrayElem, len: u8 },
}

/// Element types netprobe fetches arrays of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayElem {
    U8,
    U16,
}

/// Kernel maximum array length in a fetch-arg type.
pub const MAX_ARRAY_LEN: u8 = 64;

impl FetchType {
    /// The type as written after `:` in a fetch-arg.
    pub fn kernel_name(self) -> String {
        match self {
            FetchType::Int(t) => t.name().into(),
            FetchType::String => "string".into(),
            FetchType::Array { elem, len } => format!(
                "{}[{len}]",
                match elem {
                    ArrayElem::U8 => "u8",
                    ArrayElem::U16 => "u16",
                }
            ),
        }
    }

    /// Parses the kernel type names netprobe supports; `None` for anything else.
    pub fn parse(s: &str) -> Option<FetchType> {
        if let Some(t) = IntType::parse(s) {
            return Some(FetchType::Int(t));
        }
        Some(match s {
            "string" => FetchType::String,
            _ => {
                let (elem, rest) = if let Some(r) = s.strip_prefix("u8[") {
                    (ArrayElem::U8, r)
                } else if let Some(r) = s.strip_prefix("u16[") {
                    (ArrayElem::U16, r)
                } else {
                    return None;
                };
                let len: u8 = rest.strip_suffix(']')?.parse().ok()?;
                if len == 0 || len > MAX_ARRAY_LEN {
                    return None;
                }
                FetchType::Array { elem, len }
            }
        })
    }

    /// Whether values of this type print in hex.
    pub fn is_hex(self) -> bool {
        matches!(self, FetchType::Int(t) if t.is_hex())
    }
}

impl From<IntType> for FetchType {
    fn from(t: IntType) -> FetchType {
        FetchType::Int(t)
    }
}

/// A raw `FETCHARG:TYPE` as users write it after `NAME=` (`+8(%si):s32`): the expression and
/// its type; `Err` says why the text is not one.
pub fn parse_raw(text: &str) -> std::result::Result<(String, FetchType), String> {
    let Some((expr, ty)) = text.rsplit_once(':') else {
        return Err("write NAME=TYPE or NAME=FETCHARG:TYPE (e.g. len=+8(%si):s32)".into());
    };
    let ty = FetchType::parse(ty).ok_or_else(|| format!("unknown kernel type '{ty}'"))?;
    Ok((expr.to_string(), ty))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_types_round_trip() {
        for t in [
            "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64",
            "string", "u16[64]", "u8[1]",
        ] {
            assert_eq!(FetchType::parse(t).unwrap().kernel_name(), t);
        }
        assert_eq!(FetchType::parse("u16[65]"), None);
        assert_eq!(FetchType::parse("u16[0]"), None);
        assert_eq!(FetchType::parse("bad"), None);
    }
}
