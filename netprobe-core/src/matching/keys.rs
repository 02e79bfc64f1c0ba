//! The names a symbol answers to: its full name and the short forms users type (a native
//! name without its version, a managed method without its signature or namespace, a Go method
//! without its package path).

use crate::symbol::SymbolKind;
use std::borrow::Cow;

/// Whether `text` can equal one of the names [`match_keys`] gives `name`, told without building
/// them: a native function's names are `name` and a prefix of it; a Go function's are `name`, a
/// suffix of it, and `name` with `·` written `.`. `true` for managed methods (their short names
/// are composed).
pub(super) fn could_equal_a_key(text: &str, name: &str, kind: SymbolKind) -> bool {
    match kind {
        SymbolKind::Function | SymbolKind::Ifunc => name.starts_with(text),
        SymbolKind::GoFunction => name.ends_with(text) || name.contains('·'),
        SymbolKind::ManagedMethod => true,
    }
}

/// The names a symbol answers to, full name first.
///
/// - native functions: the name, and without its `@VERSION`/`@@VERSION` suffix;
/// - managed methods in crossgen's format `[instance] RET [Assembly] NS.Type::Method(ARGS)`:
///   `NS.Type::Method(ARGS)`, `NS.Type::Method`, `Type::Method(ARGS)`, `Type::Method`, and for a
///   nested type `NS.Outer+Inner` also `Inner::Method(ARGS)` and `Inner::Method`;
/// - Go functions: the name, and for methods the name without its package path
///   (`net/http.(*conn).serve` → `(*conn).serve`), the package ending at the first `.` after the
///   last `/` as in Go's `debug/gosym` (`Sym.PackageName`).
pub fn match_keys(name: &str, kind: SymbolKind) -> Vec<Cow<'_, str>> {
    let mut keys: Vec<Cow<'_, str>> = vec![Cow::Borrowed(name)];
    match kind {
        SymbolKind::Function | SymbolKind::Ifunc => {
            if let Some(at) = name.find('@') {
                if at > 0 {
                    keys.push(Cow::Borrowed(&name[..at]));
                }
            }
        }
        SymbolKind::ManagedMethod => managed_keys(name, &mut keys),
        SymbolKind::GoFunction => {
            // The pclntab writes `·` where the ELF tables and users write `.`
            // (`type..eq.net.dialResult·1`).
            if name.contains('·') {
                keys.push(Cow::Owned(name.replace('·', ".")));
            }
            let path_end = name.rfind('/').map_or(0, |i| i + 1);
            if let Some(dot) = name[path_end..].find('.') {
                let rest = &name[path_end + dot + 1..];
                // A method: Type.Method or (*Type).Method after the package.
                if rest.contains('.') {
                    keys.push(Cow::Borrowed(rest));
                }
            }
        }
    }
    keys
}

fn managed_keys<'a>(name: &'a str, keys: &mut Vec<Cow<'a, str>>) {
    let Some(sep) = name.find("::") else {
        return;
    };
    let type_start = name[..sep].rfind(' ').map_or(0, |i| i + 1);
    let qualified_with_sig = &name[type_start..];
    let paren = name[sep..].find('(').map(|p| sep + p);
    let qualified = match paren {
        Some(p) => &name[type_start..p],
        None => qualified_with_sig,
    };
    let sig = paren.map_or("", |p| &name[p..]);
    let type_path = &name[type_start..sep];
    let method = &qualified[sep - type_start + 2..];
    if qualified_with_sig != name {
        keys.push(Cow::Borrowed(qualified_with_sig));
    }
    if qualified != qualified_with_sig {
        keys.push(Cow::Borrowed(qualified));
    }
    // Short type: after the namespace (last '.' before any generic arguments).
    let plain_end = type_path.find('<').unwrap_or(type_path.len());
    let short_start = type_path[..plain_end].rfind('.').map_or(0, |i| i + 1);
    let short_type = &type_path[short_start..];
    let mut push_short = |ty: &str| {
        if ty != type_path {
            keys.push(Cow::Owned(format!("{ty}::{method}{sig}")));
            if !sig.is_empty() {
                keys.push(Cow::Owned(format!("{ty}::{method}")));
            }
        }
    };
    push_short(short_type);
    if let Some(plus) = short_type[..short_type.find('<').unwrap_or(short_type.len())].rfind('+') {
        push_short(&short_type[plus + 1..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_keys_of_seed_names() {
        let k = match_keys(
            "instance string [sample-netcore-app] sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)",
            SymbolKind::ManagedMethod,
        );
        let k: Vec<&str> = k.iter().map(|c| c.as_ref()).collect();
        assert!(
            k.contains(&"sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)")
        );
        assert!(k.contains(&"sample_netcore_app.Providers.EchoProvider::calculateEchoValue"));
        assert!(k.contains(&"EchoProvider::calculateEchoValue(string)"));
        assert!(k.contains(&"EchoProvider::calculateEchoValue"));

        let k = match_keys(
            "instance class [Microsoft.AspNetCore.Mvc.Core]Microsoft.AspNetCore.Mvc.ActionResult`1<string> [sample-netcore-app] sample_netcore_app.Controllers.EchoController::Get(string)",
            SymbolKind::ManagedMethod,
        );
        assert!(k.iter().any(|c| c == "EchoController::Get"));

        let k = match_keys("void [A] NS.Outer+Inner::Run()", SymbolKind::ManagedMethod);
        assert!(k.iter().any(|c| c == "Outer+Inner::Run"));
        assert!(k.iter().any(|c| c == "Inner::Run"));
    }

    #[test]
    fn go_keys() {
        let k = match_keys("net/http.(*conn).serve", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "(*conn).serve"));
        let k = match_keys("main.fib", SymbolKind::GoFunction);
        assert_eq!(k.len(), 1);
        let k = match_keys("type..eq.net.dialResult·1", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "type..eq.net.dialResult.1"));
        let k = match_keys("main.(*Calc).Add", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "(*Calc).Add"));
    }
}
