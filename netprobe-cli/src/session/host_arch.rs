//! Live probes run in this host's kernel on this host's processes, so every probed image must be
//! of the host's architecture: an aarch64 binary's breakpoint bytes, registers and stack
//! layout mean nothing to an x86-64 kernel (and it could only be run here under emulation,
//! where uprobes do not reach). `--dry-run` plans any architecture (the rules are the image's,
//! `netprobe_core::arch`), so it is the way to see an aarch64 image's probes on an x86-64 host.

use crate::error::Error;
use crate::plan::ProbePlan;
use netprobe_core::arch::Arch;

/// The refusal of a plan with a probe in an image of another architecture than `host`'s;
/// `None` when every probe is of the host's.
pub(super) fn foreign_architecture(plan: &ProbePlan, host: Option<Arch>) -> Option<Error> {
    let p = plan.probes.iter().find(|p| Some(p.arch) != host)?;
    let here = host.map_or("an architecture netprobe has no rules for", Arch::name);
    Some(Error::Refused {
        probe: format!("{}:{}", p.path.display(), p.offset),
        reason: format!(
            "it is an {} image and this host is {here}, so its probes cannot run here",
            p.arch
        ),
        fix: format!(
            "run netprobe on an {} host, or add --dry-run to see the probes",
            p.arch
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_of_another_architecture_is_refused_in_one_line() {
        let mut plan = crate::sinks::test_plan(&["f"], "/bin/app");
        assert!(foreign_architecture(&plan, Some(Arch::X86_64)).is_none());
        plan.probes[0].arch = Arch::Aarch64;
        let e = foreign_architecture(&plan, Some(Arch::X86_64))
            .unwrap()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(
            e.contains("is an aarch64 image and this host is x86_64"),
            "{e}"
        );
        assert!(e.contains("--dry-run"), "{e}");
        assert!(foreign_architecture(&plan, Some(Arch::Aarch64)).is_none());
    }
}
