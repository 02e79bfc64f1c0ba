//! Kubernetes pods on a node, from the labels the kubelet puts on every container it asks the
//! runtime for (kubelet `pkg/kubelet/types/labels.go`: `io.kubernetes.pod.name`,
//! `io.kubernetes.pod.namespace`, `io.kubernetes.pod.uid`, `io.kubernetes.container.name`), and
//! the pod's own labels, which the CRI runtimes copy onto the pod's containers.

use serde::Serialize;
use std::collections::BTreeMap;

/// The label keys the kubelet sets on a container (kubelet `pkg/kubelet/types/labels.go`).
pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// Where a container sits in Kubernetes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    /// The container's name in the pod spec; `None` for the pod's sandbox (`pause`) container.
    pub container: Option<String>,
}

/// Whether a container with `labels` is a pod's sandbox (the `pause` container that holds the
/// pod's namespaces): containerd's CRI marks it `io.cri-containerd.kind=sandbox` (containerd
/// `internal/cri/labels`), CRI-O and dockershim name its container `POD`, and it has the pod's
/// labels but no container name. It runs no application code.
pub fn is_sandbox(labels: &BTreeMap<String, String>) -> bool {
    labels
        .get("io.cri-containerd.kind")
        .is_some_and(|k| k == "sandbox")
        || labels.get(CONTAINER_NAME).is_some_and(|n| n == "POD")
        || (labels.contains_key(POD_NAME) && !labels.contains_key(CONTAINER_NAME))
}

impl Pod {
    /// The pod a container with `labels` belongs to; `None` when the kubelet did not make it.
    pub fn of_labels(labels: &BTreeMap<String, String>) -> Option<Pod> {
        Some(Pod {
            namespace: labels.get(POD_NAMESPACE)?.clone(),
            name: labels.get(POD_NAME)?.clone(),
            container: labels.get(CONTAINER_NAME).cloned(),
        })
    }
}

/// `--pod [NAMESPACE/]NAME`: a pod by name, in one namespace or in any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: Option<String>,
    pub name: String,
}

impl PodRef {
    /// Parses `[NAMESPACE/]NAME`; both parts are DNS labels or subdomains as Kubernetes allows
    /// them for namespaces and pod names (RFC 1123: lowercase letters, digits, `-` and `.`, at
    /// most 253 bytes, starting and ending with a letter or digit).
    pub fn parse(text: &str) -> Result<PodRef, String> {
        let (namespace, name) = match text.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, text),
        };
        for (what, part) in namespace
            .map(|n| ("namespace", n))
            .into_iter()
            .chain([("pod name", name)])
        {
            if !is_dns_subdomain(part) {
                return Err(format!(
                    "--pod {text}: {what} {part:?} is not a Kubernetes name (lowercase letters, digits, '-' and '.', as `kubectl get pods -A` shows them): give --pod NAMESPACE/NAME"
                ));
            }
        }
        Ok(PodRef {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        })
    }

    /// Whether a container of `pod` belongs to this pod.
    pub fn matches(&self, pod: &Pod) -> bool {
        pod.name == self.name
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == pod.namespace)
    }
}

/// An RFC 1123 DNS subdomain, as Kubernetes validates names
/// (apimachinery `pkg/util/validation/validation.go`, `IsDNS1123Subdomain`).
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// `--selector`: a Kubernetes label selector (apimachinery `pkg/labels/selector.go`, the syntax
/// `kubectl get -l` takes): requirements joined by `,`, all of which must hold:
/// `key=value`, `key==value`, `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key`
/// (exists) and `!key` (does not exist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// As given, for messages.
    text: String,
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// Longest selector text taken (a command-line argument; Kubernetes has no limit, but a selector
/// longer than this is a mistake, not a query).
const MAX_SELECTOR_LEN: usize = 4096;

impl LabelSelector {
    /// Parses a selector; an error names the requirement at fault and the syntax.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let bad = |why: String| {
            format!("--selector {text:.80}: {why} (requirements like app=checkout, tier!=db, env in (prod,staging), !canary, joined by ',')")
        };
        if text.len() > MAX_SELECTOR_LEN {
            return Err(bad(format!("longer than {MAX_SELECTOR_LEN} bytes")));
        }
        let mut requirements = Vec::new();
        for part in split_requirements(text).map_err(&bad)? {
            requirements.push(Requirement::parse(part.trim()).map_err(&bad)?);
        }
        if requirements.is_empty() {
            return Err(bad("no requirement".into()));
        }
        Ok(LabelSelector {
            requirements,
            text: text.to_string(),
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits at the commas outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u8, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("nested parentheses".into()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a ')' without its '('".into()),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

impl Requirement {
    fn parse(part: &str) -> Result<Requirement, String> {
        if part.is_empty() {
            return Err("an empty requirement".into());
        }
        if let Some(key) = part.strip_prefix('!') {
            return Ok(Requirement::DoesNotExist(label_key(key.trim())?));
        }
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some((k, v)) = part.split_once(op) {
                let (k, v) = (label_key(k.trim())?, label_value(v.trim())?);
                return Ok(if negated {
                    Requirement::NotIn(k, vec![v])
                } else {
                    Requirement::In(k, vec![v])
                });
            }
        }
        let mut words = part.splitn(2, char::is_whitespace);
        let key = label_key(words.next().unwrap_or_default())?;
        let Some(rest) = words.next().map(str::trim) else {
            return Ok(Requirement::Exists(key));
        };
        let (negated, set) = if let Some(s) = rest.strip_prefix("notin") {
            (true, s)
        } else if let Some(s) = rest.strip_prefix("in") {
            (false, s)
        } else {
            return Err(format!(
                "{part:?}: expected =, ==, !=, in or notin after {key:?}"
            ));
        };
        let set = set
            .trim()
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("{part:?}: the values of in/notin go in parentheses"))?;
        let values = set
            .split(',')
            .map(|v| label_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if negated {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        })
    }
}

/// A label key: `[PREFIX/]NAME`, NAME at most 63 bytes of alphanumerics, `-`, `_`, `.` starting
/// and ending alphanumeric, PREFIX a DNS subdomain (apimachinery `IsQualifiedName`).
fn label_key(k: &str) -> Result<String, String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) || !is_label_name(name) {
        return Err(format!("{k:?} is not a label key"));
    }
    Ok(k.to_string())
}

/// A label value: empty, or at most 63 bytes like a key's name part (apimachinery
/// `IsValidLabelValue`).
fn label_value(v: &str) -> Result<String, String> {
    if v.is_empty() || is_label_name(v) {
        Ok(v.to_string())
    } else {
        Err(format!("{v:?} is not a label value"))
    }
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_as_kubectl_takes_them() {
        let web = labels(&[("app", "checkout"), ("tier", "web"), ("env", "prod")]);
        let db = labels(&[("app", "checkout"), ("tier", "db")]);
        let cases = [
            ("app=checkout", true, true),
            ("app==checkout,tier=web", true, false),
            ("tier!=db", true, false),
            ("env in (prod, staging)", true, false),
            ("env notin (prod)", false, true),
            ("env", true, false),
            ("!env", false, true),
            ("app=checkout, !env", false, true),
            ("app.kubernetes.io/name=x", false, false),
        ];
        for (sel, on_web, on_db) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!((s.matches(&web), s.matches(&db)), (on_web, on_db), "{sel}");
        }
    }

    #[test]
    fn bad_selectors_are_named() {
        for bad in [
            "",
            ",",
            "app=",
            "=x",
            "app in prod",
            "env in (prod",
            "a)b",
            "app=che ckout",
            "-app=x",
            "a/b/c=x",
            "app ~ x",
        ] {
            let e = LabelSelector::parse(bad);
            if bad == "app=" {
                // An empty value is a value (`app=` matches app set to "").
                assert!(e.is_ok());
                continue;
            }
            let e = e.expect_err(bad);
            assert!(e.starts_with("--selector "), "{e}");
        }
    }

    #[test]
    fn pods_by_name_and_namespace() {
        let pod = Pod::of_labels(&labels(&[
            (POD_NAME, "checkout-7d4"),
            (POD_NAMESPACE, "shop"),
            (CONTAINER_NAME, "api"),
        ]))
        .unwrap();
        assert_eq!(pod.container.as_deref(), Some("api"));
        assert!(PodRef::parse("shop/checkout-7d4").unwrap().matches(&pod));
        assert!(PodRef::parse("checkout-7d4").unwrap().matches(&pod));
        assert!(!PodRef::parse("other/checkout-7d4").unwrap().matches(&pod));
        for bad in ["", "/x", "a/", "Shop/x", "a/b/c", "x_y", "-x"] {
            assert!(PodRef::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Pod::of_labels(&labels(&[(POD_NAME, "x")])), None);
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused(text in "\\PC{0,80}") {
            let _ = LabelSelector::parse(&text);
            let _ = PodRef::parse(&text);
        }

        #[test]
        fn equality_selects_exactly_that_value(k in "[a-z][a-z0-9]{0,10}", v in "[a-z0-9]{1,10}", w in "[a-z0-9]{1,10}") {
            let s = LabelSelector::parse(&format!("{k}={v}")).unwrap();
            prop_assert!(s.matches(&labels(&[(&k, &v)])));
            prop_assert_eq!(s.matches(&labels(&[(&k, &w)])), v == w);
            prop_assert!(!s.matches(&BTreeMap::new()));
        }
    }
}
