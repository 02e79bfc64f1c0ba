//! Signatures decoded to [`TypeSig`] and [`MethodSig`] values, or skipped: the two
//! [`SigVisitor`]s that print nothing.

use super::walk::{walk_method, walk_type, ArrayShape, MethodHeader, SigVisitor, Wrapper};
use super::SigReader;
use crate::dotnet::metadata::types::{MethodSig, TypeSig, TypeToken};
use crate::dotnet::metadata::Metadata;

/// Builds the [`TypeSig`] of each type walked.
struct Decode;

impl SigVisitor for Decode {
    type Type = TypeSig;
    type Method = MethodSig;

    fn primitive(&mut self, p: TypeSig) -> TypeSig {
        p
    }

    fn named(&mut self, value_type: bool, ty: TypeToken) -> TypeSig {
        if value_type {
            TypeSig::ValueType { ty }
        } else {
            TypeSig::Class { ty }
        }
    }

    fn generic_param(&mut self, of_method: bool, index: u32) -> TypeSig {
        if of_method {
            TypeSig::MVar { index }
        } else {
            TypeSig::Var { index }
        }
    }

    fn wrapped(&mut self, wrapper: Wrapper, inner: TypeSig) -> TypeSig {
        let inner = Box::new(inner);
        match wrapper {
            Wrapper::Ptr => TypeSig::Ptr { to: inner },
            Wrapper::ByRef => TypeSig::ByRef { to: inner },
            Wrapper::SzArray => TypeSig::SzArray { of: inner },
            Wrapper::Pinned => TypeSig::Pinned { inner },
            Wrapper::Modified { required, modifier } => TypeSig::Modified {
                required,
                modifier,
                inner,
            },
        }
    }

    fn array(&mut self, of: TypeSig, shape: ArrayShape) -> TypeSig {
        TypeSig::Array {
            of: Box::new(of),
            rank: shape.rank,
            sizes: shape.sizes,
            lower_bounds: shape.lower_bounds,
        }
    }

    fn generic_inst(
        &mut self,
        value_type: bool,
        generic: TypeToken,
        args: Vec<TypeSig>,
    ) -> TypeSig {
        TypeSig::GenericInst {
            value_type,
            generic,
            args,
        }
    }

    fn fn_ptr(&mut self, sig: MethodSig) -> TypeSig {
        TypeSig::FnPtr { sig: Box::new(sig) }
    }

    fn method(
        &mut self,
        header: MethodHeader,
        ret: TypeSig,
        params: Vec<TypeSig>,
        sentinel: Option<usize>,
        _fn_ptr: bool,
    ) -> Result<MethodSig, String> {
        Ok(MethodSig {
            has_this: header.has_this,
            explicit_this: header.explicit_this,
            calling_convention: header.calling_convention,
            generic_params: header.generic_params,
            ret,
            params,
            sentinel,
        })
    }
}

/// Builds nothing: the walk alone, to find where a type ends.
struct Skip;

impl SigVisitor for Skip {
    type Type = ();
    type Method = ();

    fn primitive(&mut self, _: TypeSig) {}
    fn named(&mut self, _: bool, _: TypeToken) {}
    fn generic_param(&mut self, _: bool, _: u32) {}
    fn wrapped(&mut self, _: Wrapper, _: ()) {}
    fn array(&mut self, _: (), _: ArrayShape) {}
    fn generic_inst(&mut self, _: bool, _: TypeToken, _: Vec<()>) {}
    fn fn_ptr(&mut self, _: ()) {}
    fn method(
        &mut self,
        _: MethodHeader,
        _: (),
        _: Vec<()>,
        _: Option<usize>,
        _: bool,
    ) -> Result<(), String> {
        Ok(())
    }
}

impl SigReader<'_> {
    /// A method signature (MethodDefSig / MethodRefSig / StandAloneMethodSig, II.23.2.1-3).
    pub fn method_sig(&mut self, depth: u32) -> Result<MethodSig, String> {
        walk_method(self, &mut Decode, depth, false)
    }

    /// Skips one type without building it (the same walk as [`SigReader::type_sig`]).
    pub fn skip_type(&mut self, depth: u32) -> Result<(), String> {
        walk_type(self, &mut Skip, depth)
    }

    /// One type (II.23.2.12), including custom modifiers, `BYREF` and `TYPEDBYREF`.
    pub fn type_sig(&mut self, depth: u32) -> Result<TypeSig, String> {
        walk_type(self, &mut Decode, depth)
    }
}

impl Metadata<'_> {
    /// Decodes the method signature blob `sig` (II.23.2.1).
    pub fn method_sig(&self, sig: &[u8]) -> Result<MethodSig, String> {
        let mut r = SigReader::new(sig);
        r.method_sig(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dotnet::metadata::compressed::tests::{enc_s, enc_u};
    use crate::dotnet::metadata::types::table;
    use proptest::prelude::*;

    fn enc_tok(t: &TypeToken, out: &mut Vec<u8>) {
        let tag = match t.table {
            table::TYPE_DEF => 0,
            table::TYPE_REF => 1,
            _ => 2,
        };
        enc_u(t.rid << 2 | tag, out);
    }

    pub(crate) fn enc_type(t: &TypeSig, out: &mut Vec<u8>) {
        let simple = |b: u8, out: &mut Vec<u8>| out.push(b);
        match t {
            TypeSig::Void => simple(0x01, out),
            TypeSig::Boolean => simple(0x02, out),
            TypeSig::Char => simple(0x03, out),
            TypeSig::I1 => simple(0x04, out),
            TypeSig::U1 => simple(0x05, out),
            TypeSig::I2 => simple(0x06, out),
            TypeSig::U2 => simple(0x07, out),
            TypeSig::I4 => simple(0x08, out),
            TypeSig::U4 => simple(0x09, out),
            TypeSig::I8 => simple(0x0a, out),
            TypeSig::U8 => simple(0x0b, out),
            TypeSig::R4 => simple(0x0c, out),
            TypeSig::R8 => simple(0x0d, out),
            TypeSig::String => simple(0x0e, out),
            TypeSig::Ptr { to } => {
                out.push(0x0f);
                enc_type(to, out)
            }
            TypeSig::ByRef { to } => {
                out.push(0x10);
                enc_type(to, out)
            }
            TypeSig::ValueType { ty } => {
                out.push(0x11);
                enc_tok(ty, out)
            }
            TypeSig::Class { ty } => {
                out.push(0x12);
                enc_tok(ty, out)
            }
            TypeSig::Var { index } => {
                out.push(0x13);
                enc_u(*index, out)
            }
            TypeSig::Array {
                of,
                rank,
                sizes,
                lower_bounds,
            } => {
                out.push(0x14);
                enc_type(of, out);
                enc_u(*rank, out);
                enc_u(sizes.len() as u32, out);
                for s in sizes {
                    enc_u(*s, out);
                }
                enc_u(lower_bounds.len() as u32, out);
                for l in lower_bounds {
                    enc_s(*l, out);
                }
            }
            TypeSig::GenericInst {
                value_type,
                generic,
                args,
            } => {
                out.push(0x15);
                out.push(if *value_type { 0x11 } else { 0x12 });
                enc_tok(generic, out);
                enc_u(args.len() as u32, out);
                for a in args {
                    enc_type(a, out);
                }
            }
            TypeSig::TypedByRef => simple(0x16, out),
            TypeSig::I => simple(0x18, out),
            TypeSig::U => simple(0x19, out),
            TypeSig::FnPtr { sig } => {
                out.push(0x1b);
                enc_method(sig, out)
            }
            TypeSig::Object => simple(0x1c, out),
            TypeSig::SzArray { of } => {
                out.push(0x1d);
                enc_type(of, out)
            }
            TypeSig::MVar { index } => {
                out.push(0x1e);
                enc_u(*index, out)
            }
            TypeSig::Modified {
                required,
                modifier,
                inner,
            } => {
                out.push(if *required { 0x1f } else { 0x20 });
                enc_tok(modifier, out);
                enc_type(inner, out)
            }
            TypeSig::Pinned { inner } => {
                out.push(0x45);
                enc_type(inner, out)
            }
            TypeSig::Canon => simple(0x3e, out),
        }
    }

    pub(crate) fn enc_method(m: &MethodSig, out: &mut Vec<u8>) {
        let mut cc = m.calling_convention;
        if m.has_this {
            cc |= 0x20;
        }
        if m.explicit_this {
            cc |= 0x40;
        }
        if m.generic_params > 0 {
            cc |= 0x10;
        }
        out.push(cc);
        if m.generic_params > 0 {
            enc_u(m.generic_params, out);
        }
        enc_u(m.params.len() as u32, out);
        enc_type(&m.ret, out);
        for p in &m.params {
            enc_type(p, out);
        }
    }

    fn token() -> impl Strategy<Value = TypeToken> {
        (
            prop_oneof![
                Just(table::TYPE_DEF),
                Just(table::TYPE_REF),
                Just(table::TYPE_SPEC)
            ],
            1u32..0x00ff_ffff,
        )
            .prop_map(|(table, rid)| TypeToken {
                module: 0,
                table,
                rid,
            })
    }

    pub(crate) fn type_sig() -> impl Strategy<Value = TypeSig> {
        let leaf = prop_oneof![
            Just(TypeSig::Boolean),
            Just(TypeSig::Char),
            Just(TypeSig::I1),
            Just(TypeSig::U1),
            Just(TypeSig::I2),
            Just(TypeSig::U2),
            Just(TypeSig::I4),
            Just(TypeSig::U4),
            Just(TypeSig::I8),
            Just(TypeSig::U8),
            Just(TypeSig::R4),
            Just(TypeSig::R8),
            Just(TypeSig::String),
            Just(TypeSig::Object),
            Just(TypeSig::I),
            Just(TypeSig::U),
            Just(TypeSig::TypedByRef),
            Just(TypeSig::Canon),
            token().prop_map(|ty| TypeSig::Class { ty }),
            token().prop_map(|ty| TypeSig::ValueType { ty }),
            (0u32..0x1fff_ffff).prop_map(|index| TypeSig::Var { index }),
            (0u32..1000).prop_map(|index| TypeSig::MVar { index }),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| TypeSig::Ptr { to: Box::new(t) }),
                inner
                    .clone()
                    .prop_map(|t| TypeSig::ByRef { to: Box::new(t) }),
                inner
                    .clone()
                    .prop_map(|t| TypeSig::SzArray { of: Box::new(t) }),
                (
                    inner.clone(),
                    1u32..5,
                    proptest::collection::vec(0u32..100_000, 0..2),
                    proptest::collection::vec(-300_000i32..300_000, 0..2)
                )
                    .prop_map(|(t, rank, sizes, lower_bounds)| {
                        let rank = rank.max(sizes.len() as u32).max(lower_bounds.len() as u32);
                        TypeSig::Array {
                            of: Box::new(t),
                            rank,
                            sizes,
                            lower_bounds,
                        }
                    }),
                (
                    any::<bool>(),
                    token(),
                    proptest::collection::vec(inner.clone(), 1..4)
                )
                    .prop_map(|(value_type, generic, args)| TypeSig::GenericInst {
                        value_type,
                        generic,
                        args
                    }),
                (any::<bool>(), token(), inner.clone()).prop_map(|(required, modifier, t)| {
                    TypeSig::Modified {
                        required,
                        modifier,
                        inner: Box::new(t),
                    }
                }),
                (
                    any::<bool>(),
                    inner.clone(),
                    proptest::collection::vec(inner, 0..3)
                )
                    .prop_map(|(has_this, ret, params)| {
                        TypeSig::FnPtr {
                            sig: Box::new(MethodSig {
                                has_this,
                                explicit_this: false,
                                calling_convention: 0,
                                generic_params: 0,
                                ret,
                                params,
                                sentinel: None,
                            }),
                        }
                    }),
            ]
        })
    }

    proptest! {
        /// Encoding any signature and decoding it gives the same signature back.
        #[test]
        fn method_sig_roundtrip(has_this in any::<bool>(), generic_params in 0u32..3, ret in type_sig(), params in proptest::collection::vec(type_sig(), 0..5)) {
            let m = MethodSig { has_this, explicit_this: false, calling_convention: 0, generic_params, ret, params, sentinel: None };
            let mut bytes = Vec::new();
            enc_method(&m, &mut bytes);
            let mut r = SigReader::new(&bytes);
            prop_assert_eq!(r.method_sig(0).unwrap(), m);
            prop_assert!(r.rest().is_empty());
        }

        /// Skipping a type refuses exactly what decoding it refuses, with the same reason, and
        /// stops where decoding does: one walk of the grammar.
        #[test]
        fn skipping_agrees_with_decoding(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let (mut decoding, mut skipping) = (SigReader::new(&bytes), SigReader::new(&bytes));
            let decoded = decoding.type_sig(0);
            let skipped = skipping.skip_type(0);
            prop_assert_eq!(decoded.as_ref().err(), skipped.as_ref().err());
            prop_assert_eq!(decoding.pos, skipping.pos);
        }

        /// Arbitrary bytes never panic the signature decoder.
        #[test]
        fn sig_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = SigReader::new(&bytes).method_sig(0);
            let _ = SigReader::new(&bytes).type_sig(0);
        }
    }

    #[test]
    fn deep_nesting_is_rejected_not_a_stack_overflow() {
        let mut bytes = vec![0x00, 0x00];
        bytes.extend(std::iter::repeat_n(0x0f, 100_000));
        bytes.push(0x08);
        assert!(SigReader::new(&bytes).method_sig(0).is_err());
    }
}
