//! `netprobe ps`: one line (or JSON object) per process: pid, container, command, kind (.NET with
//! runtime version, tiering and ReadyToRun images mapped; Go with version and ABI; native) and
//! whether netprobe can probe it. The facts come from `netprobe_core::inventory`; this prints.

use crate::backend::tracefs::Tracefs;
use crate::cli::PsArgs;
use crate::output::Out;
use netprobe_core::abi::go::GoAbi;
use netprobe_core::capabilities::CapSet;
use netprobe_core::dotnet::runtime::{self, Knobs, Source};
use netprobe_core::inventory::{self, DotnetRuntime, Host, Kind, ProcessEntry};
use std::process::ExitCode;

pub fn run(args: &PsArgs) -> anyhow::Result<ExitCode> {
    let host = Host {
        euid: effective_uid(),
        caps: CapSet::effective(),
        // An unsearchable tracefs folder is a missing capability, which `caps` names.
        tracefs: Tracefs::uprobes_available() || Tracefs::unsearchable().is_some(),
    };
    let containers =
        netprobe_core::containers::read_system(netprobe_core::pid_namespace::sees_global_pids());
    for note in containers.notes() {
        crate::printable::eprint_line(note);
    }
    let entries = inventory::scan(&host, &containers, &dotnet_runtime);
    let mut out = Out::new();
    if args.json {
        for e in &entries {
            out.json(e)?;
        }
    } else {
        for line in table(&entries) {
            out.line(&line)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The runtime version and tiering of .NET process `pid`, by the same rules the tiering guard of
/// `trace -p` applies (environment first, then the app's runtimeconfig.json, bundled or beside
/// it).
pub fn dotnet_runtime(pid: u32) -> Option<DotnetRuntime> {
    let (version, k) = runtime::knobs_of_process(pid)?;
    let (tiering, tiering_reason) = tiering_of(&k);
    Some(DotnetRuntime {
        version: version.text,
        tiering,
        tiering_reason,
    })
}

/// Whether tiered compilation will replace ReadyToRun code, and the setting that decided it:
/// `TieredCompilation` off, else `TC_CallCounting` off, else the source of `TieredCompilation`
/// (the default, or the variable/property that turned it on). `ReadyToRun=0` is added: then no
/// R2R code runs at all.
fn tiering_of(k: &Knobs) -> (bool, String) {
    let decided = if !k.tiered.value {
        source_text(&k.tiered.source, "TieredCompilation")
    } else if !k.call_counting.value {
        source_text(&k.call_counting.source, "TC_CallCounting")
    } else {
        source_text(&k.tiered.source, "TieredCompilation")
    };
    let mut reason = decided;
    if !k.ready_to_run.value {
        reason.push_str(&format!(
            "; {} (ReadyToRun code unused)",
            source_text(&k.ready_to_run.source, "ReadyToRun")
        ));
    }
    (k.tiered.value && k.call_counting.value, reason)
}

fn source_text(s: &Source, knob: &str) -> String {
    match s {
        Source::Default => format!("{knob} default"),
        Source::Env(var) => var.clone(),
        Source::RuntimeConfig { path, property } => format!("{property} in {}", path.display()),
    }
}

/// The text table: a header and one row per process, columns padded like `ps`.
pub fn table(entries: &[ProcessEntry]) -> Vec<String> {
    let rows: Vec<[String; 5]> = entries
        .iter()
        .map(|e| {
            [
                e.pid.to_string(),
                container_text(e),
                e.comm.clone(),
                kind_text(&e.kind),
                probe_text(e),
            ]
        })
        .collect();
    let header = ["PID", "CONTAINER", "COMMAND", "KIND", "PROBE"].map(String::from);
    let mut widths = [0usize; 5];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    std::iter::once(&header)
        .chain(&rows)
        .map(|r| {
            format!(
                "{:>w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3]
            )
            .trim_end()
            .to_string()
        })
        .collect()
}

/// `-` on the host; else the short id (12 digits, as `docker ps` shows it) and the name, with
/// the runtime when it is not Docker (and containerd's namespace), and the Kubernetes pod as
/// `NAMESPACE/POD`.
fn container_text(e: &ProcessEntry) -> String {
    let Some(c) = &e.container else {
        return "-".into();
    };
    let short = c.id.get(..12).unwrap_or(&c.id);
    let mut about = Vec::new();
    if let Some(n) = &c.name {
        about.push(n.clone());
    }
    match (c.engine, &c.namespace) {
        ("docker", _) => {}
        (engine, Some(ns)) => about.push(format!("{engine} {ns}")),
        (engine, None) => about.push(engine.to_string()),
    }
    if let Some(p) = &c.pod {
        about.push(format!("pod {}/{}", p.namespace, p.name));
    }
    if about.is_empty() {
        short.to_string()
    } else {
        format!("{short} ({})", about.join(", "))
    }
}

fn kind_text(k: &Kind) -> String {
    match k {
        Kind::Native => "native".into(),
        Kind::Go(g) => {
            let abi = match g.abi {
                Some(GoAbi::Register) => "register ABI",
                Some(GoAbi::Stack) => "stack ABI",
                None => "ABI unknown",
            };
            format!(
                "Go {} {abi}",
                g.version.as_deref().unwrap_or("(version unknown)")
            )
        }
        Kind::Dotnet(d) => {
            let rt = match &d.runtime {
                Some(r) => format!(
                    ".NET {} tiering {} ({})",
                    r.version,
                    if r.tiering { "on" } else { "off" },
                    r.tiering_reason
                ),
                None => ".NET (runtime unknown)".into(),
            };
            format!("{rt}, {} R2R images", d.r2r_images)
        }
    }
}

fn probe_text(e: &ProcessEntry) -> String {
    if e.probe.ok {
        "yes".into()
    } else {
        format!("no: {}", e.probe.reasons.join("; "))
    }
}
