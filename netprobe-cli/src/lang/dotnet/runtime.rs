//! The tiering guard's wording: what netprobe tells a user before tracing ReadyToRun code
//! whose runtime may replace it. The facts (runtime version, knobs, runtimeconfig.json, a
//! process's environment) are `netprobe_core::dotnet::runtime`'s, re-exported here.

pub use netprobe_core::dotnet::runtime::*;

/// Who the messages talk about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Pid(u32),
    /// The `-c` command (not started yet).
    Command,
}

/// The warnings to print before tracing ReadyToRun code of a runtime with these settings (one
/// line each). Empty when every call will hit.
pub fn guard_messages(subject: &Subject, version: &RuntimeVersion, k: &Knobs) -> Vec<String> {
    let who = match subject {
        Subject::Pid(p) => format!("pid {p} ({})", version.label()),
        Subject::Command => format!("the command ({})", version.label()),
    };
    let mut out: Vec<String> = k.ignored.iter().map(|s| format!("note: {s}")).collect();
    if !k.ready_to_run.value {
        out.push(format!(
            "warning: {who} runs with {}: the runtime ignores ReadyToRun code and JIT-compiles every method, so no probe on ReadyToRun code can hit; restart it without that setting",
            describe(&k.ready_to_run.source)
        ));
        return out;
    }
    if !k.replaces_r2r() {
        return out;
    }
    let var = version.recommended("TieredCompilation");
    let also = if version.reads_dotnet_prefix() {
        " (or COMPlus_TieredCompilation=0)".to_string()
    } else {
        format!(" ({} reads only COMPlus_ variables)", version.label())
    };
    let calls = match &k.call_count_threshold.source {
        Source::Default => "30 calls".to_string(),
        s => format!(
            "{} calls ({}; the value is hexadecimal)",
            k.call_count_threshold.value,
            describe(s)
        ),
    };
    let how = match subject {
        Subject::Pid(_) => format!("restart the process with {var}=0{also}"),
        Subject::Command => {
            "add --keep-r2r (it sets DOTNET_TieredCompilation=0 and COMPlus_TieredCompilation=0 for the command)".to_string()
        }
    };
    let why = match &k.tiered.source {
        Source::Default => "tiered compilation on (the default)".to_string(),
        s => format!("tiered compilation on ({})", describe(s)),
    };
    out.push(format!(
        "warning: {who} runs with {why}: after a method's first {calls} the runtime replaces its ReadyToRun code with tier-1 JIT code and probes on it stop firing; to see every call, {how}"
    ));
    out
}

/// Where a setting came from, as the warnings say it.
fn describe(source: &Source) -> String {
    match source {
        Source::Default => "the default".into(),
        Source::Env(s) => s.clone(),
        Source::RuntimeConfig { path, property } => {
            format!("{property} in {}", path.display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// .NET 8 and .NET Core 3.1, whose knob prefixes differ.
    fn v8() -> RuntimeVersion {
        parse_product_version("8.0.4").expect("a version")
    }
    fn v31() -> RuntimeVersion {
        parse_product_version("3.1.23").expect("a version")
    }
    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn default_settings_replace_r2r_code() {
        let k = knobs(&[], &v8(), None);
        assert!(k.replaces_r2r());
        let m = guard_messages(&Subject::Pid(7), &v8(), &k);
        assert_eq!(m.len(), 1);
        assert!(m[0].contains("DOTNET_TieredCompilation=0"), "{}", m[0]);
        let m = guard_messages(&Subject::Pid(7), &v31(), &knobs(&[], &v31(), None));
        assert!(
            m[0].contains("COMPlus_TieredCompilation=0") && !m[0].contains("DOTNET_"),
            "{}",
            m[0]
        );
    }

    #[test]
    fn values_are_hex() {
        assert_eq!(parse_dword("64"), Some(100));
        assert_eq!(parse_dword("0x0"), Some(0));
        assert_eq!(parse_dword("false"), None);
        let k = knobs(&env(&[("DOTNET_TC_CallCountThreshold", "64")]), &v8(), None);
        assert_eq!(k.call_count_threshold.value, 100);
        let m = guard_messages(&Subject::Command, &v8(), &k);
        assert!(
            m[0].contains("100 calls") && m[0].contains("--keep-r2r"),
            "{m:?}"
        );
        let k = knobs(&env(&[("DOTNET_TieredCompilation", "false")]), &v8(), None);
        assert!(k.replaces_r2r());
        assert!(k.ignored[0].contains("hexadecimal"), "{k:?}");
    }

    #[test]
    fn ready_to_run_off_means_no_hits() {
        let k = knobs(&env(&[("DOTNET_ReadyToRun", "0")]), &v8(), None);
        let m = guard_messages(&Subject::Pid(1), &v8(), &k);
        assert!(m
            .last()
            .unwrap()
            .contains("no probe on ReadyToRun code can hit"));
    }
}
