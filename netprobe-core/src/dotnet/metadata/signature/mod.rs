//! ECMA-335 signatures (II.23.2) and ReadyToRun's extensions to them.
//!
//! [`SigReader`] reads the pieces a signature is made of: bytes, compressed integers
//! (II.23.2) and `TypeDefOrRefOrSpecEncoded` tokens (II.23.2.8). `walk.rs` is the one walk of
//! the grammar built from them; `decode.rs` turns a walk into [`super::TypeSig`]s and
//! [`super::MethodSig`]s, and `super::display` into names.

pub(super) mod decode;
mod walk;

pub(crate) use walk::{
    replay_method, replay_type, walk_method, walk_type, ArrayShape, MethodHeader, SigVisitor,
    Wrapper,
};

use super::compressed::{decode_compressed, decode_compressed_signed};
use super::types::{table, TypeToken};

/// Reads ECMA-335 signatures (II.23.2), with ReadyToRun's extra element types.
pub struct SigReader<'s> {
    data: &'s [u8],
    pub(crate) pos: usize,
    /// Module override in effect for the type being read (ELEMENT_TYPE_MODULE_ZAPSIG).
    module: u32,
}

impl<'s> SigReader<'s> {
    pub fn new(data: &'s [u8]) -> SigReader<'s> {
        SigReader {
            data,
            pos: 0,
            module: 0,
        }
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'s [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    /// The next byte, consumed.
    pub fn next_byte(&mut self) -> Result<u8, String> {
        self.byte()
    }

    /// The next byte, not consumed; `None` at the end.
    pub fn peek_byte(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// Sets the module override for the tokens read next; returns the previous one.
    pub fn set_module(&mut self, module: u32) -> u32 {
        std::mem::replace(&mut self.module, module)
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.data.get(self.pos).ok_or("signature cut short")?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn peek(&self) -> Result<u8, String> {
        self.data
            .get(self.pos)
            .copied()
            .ok_or_else(|| "signature cut short".to_string())
    }

    /// A compressed unsigned integer.
    pub fn uint(&mut self) -> Result<u32, String> {
        decode_compressed(self.data, &mut self.pos).ok_or_else(|| "bad compressed integer".into())
    }

    /// A compressed signed integer (array lower bounds).
    pub fn sint(&mut self) -> Result<i32, String> {
        decode_compressed_signed(self.data, &mut self.pos)
            .ok_or_else(|| "bad compressed signed integer".into())
    }

    /// `TypeDefOrRefOrSpecEncoded` (II.23.2.8).
    pub fn type_token(&mut self) -> Result<TypeToken, String> {
        let v = self.uint()?;
        let table = match v & 3 {
            0 => table::TYPE_DEF,
            1 => table::TYPE_REF,
            2 => table::TYPE_SPEC,
            _ => return Err("bad TypeDefOrRefOrSpecEncoded tag".into()),
        };
        Ok(TypeToken {
            module: self.module,
            table,
            rid: v >> 2,
        })
    }
}
