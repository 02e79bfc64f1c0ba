//! INSTANCE_METHOD_ENTRYPOINTS records: a method signature (flags, module if UpdateContext,
//! owner type, token, method instantiation, constrained type, in ILCompiler.Reflection.ReadyToRun's
//! order) followed by an entry-point record; decoded whole for details, scanned without building
//! type signatures for listings, and named crossgen's way.

use super::super::parser::entry_point;
use super::super::types::method_sig_flags as msf;
use super::owners::owner_type;
use crate::bytes::us;
use crate::dotnet::metadata::{MethodSig, Names, SigReader, TypeSig};

/// A record's start, up to its owner type: its flags and the module its method token refers to
/// (UpdateContext's, else the owner type's module override, else 0).
fn entry_flags_and_module(r: &mut SigReader<'_>) -> Result<(u32, u32), String> {
    let flags = r.uint()?;
    let mut module = 0;
    let mut module_from_context = false;
    if flags & msf::UPDATE_CONTEXT != 0 {
        module = r.uint()?;
        module_from_context = true;
    }
    // The owner's module override, when it has one, is also the method token's module.
    if flags & msf::OWNER_TYPE != 0 && !module_from_context && r.peek_byte() == Some(0x3f) {
        let mut peek = SigReader::new(r.rest());
        peek.pos = 1;
        module = peek.uint()?;
    }
    Ok((flags, module))
}

/// The method token's row, after the owner type.
fn entry_method_rid(r: &mut SigReader<'_>, flags: u32) -> Result<u32, String> {
    if flags & msf::SLOT_INSTEAD_OF_TOKEN != 0 {
        return Err("instance entry names its method by slot, which netprobe cannot name".into());
    }
    r.uint()
}

/// The number of types of the method instantiation that follows.
fn instantiation_count(r: &mut SigReader<'_>) -> Result<u32, String> {
    let n = r.uint()?;
    if us(n) > r.rest().len() {
        return Err("instantiation count exceeds the entry".into());
    }
    Ok(n)
}

/// One decoded INSTANCE_METHOD_ENTRYPOINTS record.
pub(super) struct InstanceEntry {
    /// Module whose metadata the method token refers to (0 = this image).
    pub(super) module: u32,
    pub(super) owner: Option<TypeSig>,
    pub(super) member_ref: bool,
    pub(super) rid: u32,
    pub(super) method_inst: Vec<TypeSig>,
}

pub(super) fn parse_instance_entry(data: &[u8], pos: usize) -> Result<InstanceEntry, String> {
    let sig = data.get(pos..).ok_or("instance entry outside the image")?;
    let mut r = SigReader::new(sig);
    let (flags, module) = entry_flags_and_module(&mut r)?;
    let mut owner = None;
    if flags & msf::OWNER_TYPE != 0 {
        owner = Some(r.type_sig(0)?);
    }
    let rid = entry_method_rid(&mut r, flags)?;
    let mut method_inst = Vec::new();
    if flags & msf::METHOD_INSTANTIATION != 0 {
        for _ in 0..instantiation_count(&mut r)? {
            method_inst.push(r.type_sig(0)?);
        }
    }
    if flags & msf::CONSTRAINED != 0 {
        r.type_sig(0)?;
    }
    Ok(InstanceEntry {
        module,
        owner,
        member_ref: flags & msf::MEMBER_REF_TOKEN != 0,
        rid,
        method_inst,
    })
}

/// The parts of an INSTANCE_METHOD_ENTRYPOINTS record that listing needs, found without building
/// type signatures.
pub(super) struct InstanceScan {
    pub(super) module: u32,
    pub(super) member_ref: bool,
    pub(super) rid: u32,
    /// File position of the owner type signature, when present.
    pub(super) owner_at: Option<usize>,
    pub(super) runtime_function: u32,
    pub(super) has_fixups: bool,
}

pub(super) fn scan_instance_entry(data: &[u8], pos: usize) -> Result<InstanceScan, String> {
    let sig = data.get(pos..).ok_or("instance entry outside the image")?;
    let mut r = SigReader::new(sig);
    let (flags, module) = entry_flags_and_module(&mut r)?;
    let mut owner_at = None;
    if flags & msf::OWNER_TYPE != 0 {
        owner_at = Some(pos + r.pos);
        r.skip_type(0)?;
    }
    let rid = entry_method_rid(&mut r, flags)?;
    if flags & msf::METHOD_INSTANTIATION != 0 {
        for _ in 0..instantiation_count(&mut r)? {
            r.skip_type(0)?;
        }
    }
    if flags & msf::CONSTRAINED != 0 {
        r.skip_type(0)?;
    }
    let (runtime_function, has_fixups) =
        entry_point(data, pos + r.pos).ok_or("instance entry point cut short")?;
    Ok(InstanceScan {
        module,
        member_ref: flags & msf::MEMBER_REF_TOKEN != 0,
        rid,
        owner_at,
        runtime_function,
        has_fixups,
    })
}

/// What an instance entry's method token names, in the method's own module.
pub(super) struct InstanceTarget<'n> {
    pub(super) module_names: Names<'n>,
    pub(super) method_name: String,
    pub(super) sig: MethodSig,
    pub(super) owner_rid: u32,
}

pub(super) fn instance_target<'n>(
    names: &Names<'n>,
    e: &InstanceEntry,
) -> Result<InstanceTarget<'n>, String> {
    let mn = names.in_module(e.module).ok_or_else(|| {
        format!(
            "instance entry refers to module #{} that netprobe cannot open",
            e.module
        )
    })?;
    if !e.member_ref {
        let row = mn
            .md
            .method_def(e.rid)
            .ok_or_else(|| format!("instance entry names missing MethodDef {}", e.rid))?;
        Ok(InstanceTarget {
            sig: mn.md.method_sig(row.signature)?,
            method_name: row.name.to_string(),
            owner_rid: owner_type(&mn.md, e.rid).unwrap_or(0),
            module_names: mn,
        })
    } else {
        let (_, name, blob) = mn
            .md
            .member_ref(e.rid)
            .ok_or_else(|| format!("instance entry names missing MemberRef {}", e.rid))?;
        Ok(InstanceTarget {
            sig: mn.md.method_sig(blob)?,
            method_name: name.to_string(),
            owner_rid: 0,
            module_names: mn,
        })
    }
}

/// The owner of an instantiation in reflection style (``Dictionary`2[System.__Canon,...]``).
pub(super) fn instance_owner(
    names: &Names<'_>,
    e: &InstanceEntry,
    t: &InstanceTarget<'_>,
) -> String {
    let mut owner = String::new();
    match &e.owner {
        Some(o) => names.reflection(o, &mut owner),
        None => t.module_names.type_def_name(t.owner_rid, '+', &mut owner),
    }
    owner
}

/// The own name of the method an instance entry instantiates (its MethodDef or MemberRef
/// row's name), as [`instance_name`] puts it after `::`; `None` when the module or row cannot be
/// read.
pub(super) fn instance_method_name<'n>(names: &Names<'n>, e: &InstanceScan) -> Option<&'n str> {
    let mn = names.in_module(e.module)?;
    if e.member_ref {
        mn.md.member_ref(e.rid).map(|(_, name, _)| name)
    } else {
        mn.md.method_def(e.rid).map(|row| row.name)
    }
}

/// The crossgen-style name of an instantiation, formatted from the signature bytes.
pub(super) fn instance_name(
    names: &Names<'_>,
    data: &[u8],
    e: &InstanceScan,
    owner: &mut String,
) -> Result<(String, u32), String> {
    let Some(mn) = names.in_module(e.module) else {
        // A method of another module of the version bubble that no resolver could open: keep
        // the entry, named by module and token (see `Assembly::methods`).
        let table = if e.member_ref {
            0x0a00_0000
        } else {
            0x0600_0000
        };
        return Ok((
            format!("[module#{}]<{:#010x}>", e.module, table | e.rid),
            table | e.rid,
        ));
    };
    let (method_name, sig, token, owner_rid) = if e.member_ref {
        let (_, name, blob) = mn
            .md
            .member_ref(e.rid)
            .ok_or_else(|| format!("instance entry names missing MemberRef {}", e.rid))?;
        (name, blob, 0x0a00_0000 | e.rid, 0)
    } else {
        let row = mn
            .md
            .method_def(e.rid)
            .ok_or_else(|| format!("instance entry names missing MethodDef {}", e.rid))?;
        let owner = owner_type(&mn.md, e.rid).unwrap_or(0);
        (row.name, row.signature, 0x0600_0000 | e.rid, owner)
    };
    owner.clear();
    match e.owner_at {
        Some(at) => {
            let mut r = SigReader::new(data.get(at..).unwrap_or(&[]));
            names.reflection_from_sig(&mut r, owner, 0)?;
        }
        None => mn.type_def_name(owner_rid, '+', owner),
    }
    owner.push_str("::");
    owner.push_str(method_name);
    let assembly = mn.md.assembly_name().unwrap_or("?");
    let mut name = String::with_capacity(64 + owner.len());
    mn.method_from_sig(
        &mut SigReader::new(sig),
        owner,
        Some(assembly),
        &mut name,
        0,
    )?;
    Ok((name, token))
}
