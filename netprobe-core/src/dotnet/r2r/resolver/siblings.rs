//! The other assemblies of a ReadyToRun version bubble, for the types of other modules that a
//! signature names.

use super::super::parser::instance_entry_positions;
use super::super::types::section;
use super::instance::parse_instance_entry;
use crate::dotnet::metadata::{table, Metadata, MetadataLayout, ModuleResolver, TypeSig};
use crate::dotnet::Assembly;
use std::collections::BTreeSet;
use std::path::Path;

/// Other assemblies of a ReadyToRun version bubble, opened from the directory of the image, so
/// that instantiations over their types get real names (see [`Assembly::methods_with`]).
///
/// Module override indices follow readytorun-format.md "ManifestMetadata": 1..=ILAR are the
/// image's own AssemblyRef rows; above that, the R2R manifest metadata's AssemblyRefs (from
/// format 6.3 on, ILAR+1 is the manifest itself and ILAR+2 its first AssemblyRef).
pub struct SiblingAssemblies {
    modules: Vec<(u32, Assembly, Vec<u32>)>,
}

impl SiblingAssemblies {
    /// Opens, for each module index in `indices`, `<dir of asm>/<AssemblyRef name>.dll` when it
    /// exists and parses; indices that name no readable file stay unresolved (their types print
    /// as `[module#N]<token>`).
    pub fn open(asm: &Assembly, indices: impl IntoIterator<Item = u32>) -> SiblingAssemblies {
        let dir = asm.path().parent().unwrap_or(Path::new("."));
        let md = asm.metadata();
        let ilar = md.rows(table::ASSEMBLY_REF);
        let manifest = asm.r2r().and_then(|r| {
            let s = r.header.section(section::MANIFEST_METADATA)?;
            let bytes = asm.pe().bytes_at(asm.bytes(), s.rva, s.size)?;
            let layout = MetadataLayout::parse(bytes).ok()?;
            let v63 = (r.header.major_version, r.header.minor_version) >= (6, 3);
            Some((layout, bytes, v63))
        });
        let mut modules = Vec::new();
        let unique: BTreeSet<u32> = indices.into_iter().collect();
        for index in unique {
            let name = if index == 0 {
                None
            } else if index <= ilar {
                md.assembly_ref_name(index).map(str::to_string)
            } else {
                manifest.as_ref().and_then(|(layout, bytes, v63)| {
                    let m = Metadata::new(layout, bytes);
                    let rid = if *v63 { index - ilar - 1 } else { index - ilar };
                    m.assembly_ref_name(rid).map(str::to_string)
                })
            };
            let Some(name) = name else { continue };
            if let Ok(other) = asm.open_sibling(&dir.join(format!("{name}.dll"))) {
                let enclosing = other.enclosing_types().to_vec();
                modules.push((index, other, enclosing));
            }
        }
        SiblingAssemblies { modules }
    }

    /// Module indices referenced by `asm`'s instantiations (in type arguments or as the method's
    /// module); empty when every instantiation is local.
    pub fn referenced_modules(asm: &Assembly) -> BTreeSet<u32> {
        let mut set = BTreeSet::new();
        let Some(r2r) = asm.r2r() else { return set };
        let Some(s) = r2r.header.section(section::INSTANCE_METHOD_ENTRY_POINTS) else {
            return set;
        };
        let Ok(positions) = instance_entry_positions(asm.pe(), asm.bytes(), s) else {
            return set;
        };
        for p in positions {
            if let Ok(e) = parse_instance_entry(asm.bytes(), p) {
                set.insert(e.module);
                if let Some(o) = &e.owner {
                    collect_modules(o, &mut set);
                }
                for t in &e.method_inst {
                    collect_modules(t, &mut set);
                }
            }
        }
        set.remove(&0);
        set
    }
}

fn collect_modules(t: &TypeSig, set: &mut BTreeSet<u32>) {
    match t {
        TypeSig::Class { ty } | TypeSig::ValueType { ty } => {
            set.insert(ty.module);
        }
        TypeSig::GenericInst { generic, args, .. } => {
            set.insert(generic.module);
            for a in args {
                collect_modules(a, set);
            }
        }
        TypeSig::Ptr { to } | TypeSig::ByRef { to } => collect_modules(to, set),
        TypeSig::SzArray { of } | TypeSig::Array { of, .. } => collect_modules(of, set),
        TypeSig::Modified { inner, .. } | TypeSig::Pinned { inner } => collect_modules(inner, set),
        _ => {}
    }
}

impl<'a> ModuleResolver<'a> for &'a SiblingAssemblies {
    fn module(&self, index: u32) -> Option<(Metadata<'a>, &'a [u32])> {
        let s: &'a SiblingAssemblies = self;
        s.modules
            .iter()
            .find(|(i, _, _)| *i == index)
            .map(|(_, a, enc)| (a.metadata(), enc.as_slice()))
    }
}
