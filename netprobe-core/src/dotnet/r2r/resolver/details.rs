//! One listed method described: namespace, type path, name, structured signature and parameter
//! names.

use super::super::types::{MethodDetails, R2rMethod};
use super::instance::{instance_owner, instance_target, parse_instance_entry};
use super::owners::{owner_type, param_names, type_path};
use crate::dotnet::metadata::{ModuleResolver, Names};
use crate::dotnet::Assembly;

/// The structured description of one listed method (see [`Assembly::details`]).
pub(crate) fn details<'a>(
    asm: &'a Assembly,
    m: &R2rMethod,
    foreign: Option<&'a dyn ModuleResolver<'a>>,
) -> Result<MethodDetails, String> {
    let names = Names {
        md: asm.metadata(),
        enclosing: asm.enclosing_types(),
        foreign,
        type_names: None,
    };
    match m.instance_entry {
        None => {
            let rid = m.token & 0x00ff_ffff;
            let row = names
                .md
                .method_def(rid)
                .ok_or_else(|| format!("MethodDef row {rid} unreadable"))?;
            let signature = names.md.method_sig(row.signature)?;
            let owner = owner_type(&names.md, rid).unwrap_or(0);
            let (namespace, type_path) = type_path(&names, owner);
            Ok(MethodDetails {
                namespace,
                type_path,
                method_name: row.name.to_string(),
                param_names: param_names(&names.md, rid, signature.params.len()),
                signature,
                method_instantiation: Vec::new(),
            })
        }
        Some(pos) => {
            let e = parse_instance_entry(asm.bytes(), pos)?;
            let t = instance_target(&names, &e)?;
            let (namespace, mut type_path) = type_path(&t.module_names, t.owner_rid);
            let owner = instance_owner(&names, &e, &t);
            if let (Some(last), Some(open)) = (type_path.last_mut(), owner.rfind('[')) {
                if e.owner.is_some() && owner.ends_with(']') {
                    last.push_str(&owner[open..]);
                }
            }
            let param_names = if e.member_ref {
                vec![String::new(); t.sig.params.len()]
            } else {
                param_names(&t.module_names.md, e.rid, t.sig.params.len())
            };
            Ok(MethodDetails {
                namespace,
                type_path,
                method_name: t.method_name,
                param_names,
                signature: t.sig,
                method_instantiation: e.method_inst,
            })
        }
    }
}
