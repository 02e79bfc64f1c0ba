//! The type that owns a MethodDef (ECMA-335 II.22.37: a type's methods run up to the next
//! type's `MethodList`), its nesting path, and the method's parameter names (Param, II.22.33).

use crate::dotnet::metadata::{table, Metadata, Names};

/// The TypeDef that owns MethodDef `rid`: the last TypeDef whose `MethodList` starts at or
/// before `rid` (ECMA-335 II.22.37: a type's methods run up to the next type's list).
pub(super) fn owner_type(md: &Metadata<'_>, rid: u32) -> Option<u32> {
    let n = md.rows(table::TYPE_DEF);
    let (mut lo, mut hi) = (1u32, n);
    let mut best = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let start = md.type_def_method_list(mid)?;
        if start <= rid {
            best = Some(mid);
            lo = mid + 1;
        } else {
            if mid == 0 {
                break;
            }
            hi = mid - 1;
        }
    }
    best
}

/// [`owner_type`] for MethodDef rows asked mostly in increasing order (a listing walks the
/// MethodDef table): the owner found last is kept with its method range, and the binary search
/// runs only for a row outside it. Same answers as [`owner_type`] when the TypeDef table's
/// `MethodList` column never decreases, as ECMA-335 II.22.37 requires (a row inside
/// `[MethodList(t), MethodList(t + 1))` belongs to `t`; with a decreasing column, hostile input,
/// a row may get another type whose list starts at or before it).
pub(super) struct OwnerCursor {
    owner: u32,
    /// The owner's rows: `first..next` (empty until a search found one).
    first: u32,
    next: u32,
}

impl OwnerCursor {
    pub(super) fn new() -> OwnerCursor {
        OwnerCursor {
            owner: 0,
            first: 1,
            next: 1,
        }
    }

    /// The owning TypeDef of MethodDef `rid`, 0 when none is found (as `owner_type` gives it).
    pub(super) fn owner_of(&mut self, md: &Metadata<'_>, rid: u32) -> u32 {
        if (self.first..self.next).contains(&rid) {
            return self.owner;
        }
        self.owner = owner_type(md, rid).unwrap_or(0);
        let first = md.type_def_method_list(self.owner);
        let next = if self.owner < md.rows(table::TYPE_DEF) {
            md.type_def_method_list(self.owner + 1)
        } else {
            Some(md.rows(table::METHOD_DEF).saturating_add(1))
        };
        (self.first, self.next) = match (self.owner, first, next) {
            (1.., Some(first), Some(next)) if first <= rid && rid < next => (first, next),
            // Nothing to keep: the next row is searched for again.
            _ => (1, 1),
        };
        self.owner
    }
}

/// Parameter names of MethodDef `rid`, in parameter order (Param rows with sequence 1..).
pub(super) fn param_names(md: &Metadata<'_>, rid: u32, n_params: usize) -> Vec<String> {
    let mut names = vec![String::new(); n_params];
    let Some(row) = md.method_def(rid) else {
        return names;
    };
    let end = if rid < md.rows(table::METHOD_DEF) {
        md.method_def(rid + 1)
            .map_or(row.param_list, |r| r.param_list)
    } else {
        md.rows(table::PARAM) + 1
    };
    for p in row.param_list..end.min(row.param_list.saturating_add(256)) {
        if let Some((seq, name)) = md.param(p) {
            if let Some(slot) = usize::from(seq)
                .checked_sub(1)
                .and_then(|i| names.get_mut(i))
            {
                *slot = name.to_string();
            }
        }
    }
    names
}

/// `Owner::` (the owning TypeDef's name, nested types joined by `+`) of MethodDef rows visited
/// in order: consecutive rows mostly share their owner, whose name is then written once.
pub(super) struct OwnerPrefix {
    cursor: OwnerCursor,
    /// The owner whose prefix `text` holds (`u32::MAX`: none yet).
    owner: u32,
    text: String,
}

impl OwnerPrefix {
    pub(super) fn new() -> OwnerPrefix {
        OwnerPrefix {
            cursor: OwnerCursor::new(),
            owner: u32::MAX,
            text: String::new(),
        }
    }

    /// `Owner::` for MethodDef `rid`; `::` alone when no TypeDef owns it ([`Names::type_def_name`]
    /// writes nothing for TypeDef 0).
    pub(super) fn of(&mut self, names: &Names<'_>, rid: u32) -> &str {
        let owner = self.cursor.owner_of(&names.md, rid);
        if owner != self.owner {
            self.text.clear();
            names.type_def_name(owner, '+', &mut self.text);
            self.text.push_str("::");
            self.owner = owner;
        }
        &self.text
    }
}

/// Namespace of the outermost type and the nesting path of TypeDef `rid`.
pub(super) fn type_path(names: &Names<'_>, rid: u32) -> (String, Vec<String>) {
    let mut path = Vec::new();
    let mut cur = rid;
    let mut namespace = String::new();
    while cur != 0 && path.len() < 64 {
        let (_, name, ns) = names.md.type_def(cur).unwrap_or((0, "?", ""));
        path.push(name.to_string());
        namespace = ns.to_string();
        cur = names.enclosing.get(cur as usize).copied().unwrap_or(0);
    }
    path.reverse();
    (namespace, path)
}
