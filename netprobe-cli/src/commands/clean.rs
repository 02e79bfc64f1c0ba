//! `netprobe clean`: the sessions dead netprobes left (killed before their watchdog could run,
//! or with it), removed by name (`netprobe_<PIDNS>_<PID>` groups and instances whose owner no
//! longer runs; see `backend/tracefs/cleanup.rs`), and the .NET perf maps they had turned on
//! (`netprobe_core::ipc::perf_map_session::end_orphans`).

use crate::backend::tracefs::cleanup;
use crate::backend::tracefs::Tracefs;
use crate::error::Result;
use std::io::Write;

/// `netprobe clean`: removes what dead netprobe processes left. Prints what went.
pub fn clean(out: &mut dyn Write) -> Result<i32> {
    for line in netprobe_core::ipc::perf_map_session::end_orphans() {
        let _ = writeln!(out, "{line}");
    }
    let tracefs = Tracefs::open()?;
    let removed = cleanup::clean_stale(&tracefs)?;
    if removed.iter().all(|(_, r)| r.already_gone) {
        let _ = writeln!(
            out,
            "nothing to clean: no probes or instances of dead netprobe processes"
        );
    }
    for (name, r) in removed {
        if r.already_gone {
            let _ = writeln!(
                out,
                "{name}: already removed (its netprobe has exited and is not reaped yet; it or its watchdog removed the session)"
            );
            continue;
        }
        if r.by_watchdog {
            let _ = writeln!(
                out,
                "{name}: removed by its own watchdog (its netprobe was killed a moment ago; waited for it to finish)"
            );
            continue;
        }
        let _ = writeln!(
            out,
            "removed {name}: {} event(s){}",
            r.events.len(),
            if r.instance { ", instance" } else { "" }
        );
    }
    Ok(0)
}
