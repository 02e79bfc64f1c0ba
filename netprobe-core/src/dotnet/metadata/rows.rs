//! Typed rows of the tables netprobe reads (ECMA-335 II.22): each a few cells of
//! [`Metadata::cell`] with their strings and blobs looked up.

use super::tables::{Coded, Metadata};
use super::types::table;

impl<'a> Metadata<'a> {
    /// The assembly's simple name (Assembly table row 1, II.22.2); `None` for a module without
    /// an assembly manifest.
    pub fn assembly_name(&self) -> Option<&'a str> {
        self.string(self.cell(table::ASSEMBLY, 1, 7)?)
    }

    /// The module's MVID (Module row 1), as the runtime prints it in perfinfo (`{...}`).
    pub fn mvid(&self) -> Option<[u8; 16]> {
        self.guid(self.cell(table::MODULE, 1, 2)?)
    }

    /// AssemblyRef row `rid`'s name (II.22.5).
    pub fn assembly_ref_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::ASSEMBLY_REF, rid, 6)?)
    }

    /// TypeDef row `rid`: `(flags, name, namespace)`.
    pub fn type_def(&self, rid: u32) -> Option<(u32, &'a str, &'a str)> {
        Some((
            self.cell(table::TYPE_DEF, rid, 0)?,
            self.string(self.cell(table::TYPE_DEF, rid, 1)?)?,
            self.string(self.cell(table::TYPE_DEF, rid, 2)?)?,
        ))
    }

    /// TypeDef row `rid`'s first MethodDef row (`MethodList`).
    pub fn type_def_method_list(&self, rid: u32) -> Option<u32> {
        self.cell(table::TYPE_DEF, rid, 5)
    }

    /// TypeRef row `rid`: `(resolution scope (table, rid), name, namespace)` (II.22.38).
    pub fn type_ref(&self, rid: u32) -> Option<((u8, u32), &'a str, &'a str)> {
        Some((
            self.coded_cell(table::TYPE_REF, rid, 0, Coded::ResolutionScope)?,
            self.string(self.cell(table::TYPE_REF, rid, 1)?)?,
            self.string(self.cell(table::TYPE_REF, rid, 2)?)?,
        ))
    }

    /// TypeSpec row `rid`'s signature blob (II.22.39).
    pub fn type_spec(&self, rid: u32) -> Option<&'a [u8]> {
        self.blob(self.cell(table::TYPE_SPEC, rid, 0)?)
    }

    /// ModuleRef row `rid`'s name.
    pub fn module_ref_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::MODULE_REF, rid, 0)?)
    }

    /// MethodDef row `rid`: `(rva, impl_flags, flags, name, signature blob, param_list)`
    /// (II.22.26).
    pub fn method_def(&self, rid: u32) -> Option<MethodDefRow<'a>> {
        let t = table::METHOD_DEF;
        Some(MethodDefRow {
            rva: self.cell(t, rid, 0)?,
            impl_flags: self.cell(t, rid, 1)? as u16,
            flags: self.cell(t, rid, 2)? as u16,
            name: self.string(self.cell(t, rid, 3)?)?,
            signature: self.blob(self.cell(t, rid, 4)?)?,
            param_list: self.cell(t, rid, 5)?,
        })
    }

    /// The name of MethodDef row `rid` alone (column 3 of [`Metadata::method_def`]); `None`
    /// where `method_def` would give none for its name.
    pub fn method_def_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::METHOD_DEF, rid, 3)?)
    }

    /// MemberRef row `rid`: `(class (table, rid), name, signature blob)` (II.22.25).
    pub fn member_ref(&self, rid: u32) -> Option<((u8, u32), &'a str, &'a [u8])> {
        let t = table::MEMBER_REF;
        Some((
            self.coded_cell(t, rid, 0, Coded::MemberRefParent)?,
            self.string(self.cell(t, rid, 1)?)?,
            self.blob(self.cell(t, rid, 2)?)?,
        ))
    }

    /// Param row `rid`: `(sequence, name)` (II.22.33; sequence 0 is the return value).
    pub fn param(&self, rid: u32) -> Option<(u16, &'a str)> {
        let t = table::PARAM;
        Some((
            self.cell(t, rid, 1)? as u16,
            self.string(self.cell(t, rid, 2)?)?,
        ))
    }

    /// NestedClass row `rid`: `(nested typedef, enclosing typedef)` (II.22.32).
    pub fn nested_class(&self, rid: u32) -> Option<(u32, u32)> {
        let t = table::NESTED_CLASS;
        Some((self.cell(t, rid, 0)?, self.cell(t, rid, 1)?))
    }
}

/// One MethodDef row (ECMA-335 II.22.26).
#[derive(Clone, Copy, Debug)]
pub struct MethodDefRow<'a> {
    /// RVA of the IL body (0 for abstract/extern methods).
    pub rva: u32,
    pub impl_flags: u16,
    /// `MethodAttributes`; 0x0010 = static.
    pub flags: u16,
    pub name: &'a str,
    pub signature: &'a [u8],
    pub param_list: u32,
}
