//! What a session sets up before it resolves its names: tracefs opened, the watchdog forked
//! (while the process has one thread: the watchdog runs ordinary Rust code after `fork`, which is
//! only safe when no other thread could hold a lock), and for a host-wide session its tracefs
//! instance prepared on a thread ([`PreparingInstance`]). The kernel's share of starting a
//! session (the instance, its clock and buffers: 30-60 ms of waits, BENCHMARKS.md, "Time until a
//! probe is live") then runs while the names resolve.

use crate::backend::tracefs::probe::GroupName;
use crate::backend::tracefs::session::{PreparingInstance, SessionOptions};
use crate::backend::tracefs::watchdog::Watchdog;
use crate::backend::tracefs::Tracefs;

/// Tracefs, the watchdog and the instance being prepared. Dropped before the session takes them
/// (resolving failed), it removes the instance, then lets the watchdog go: nothing is left.
pub(crate) struct Armed {
    pub tracefs: Tracefs,
    watchdog: Option<Watchdog>,
    preparing: Option<PreparingInstance>,
}

impl Armed {
    /// `None` when tracefs does not open or the watchdog cannot be forked: both are then tried
    /// after resolving, and report their own errors there (a name that does not resolve is the
    /// first thing a user should hear about). `host_wide`: the session records every process,
    /// through a tracefs instance, which is prepared now; a session scoped to processes needs
    /// none.
    pub fn begin(name: &GroupName, instance: &SessionOptions, host_wide: bool) -> Option<Armed> {
        let tracefs = Tracefs::open().ok()?;
        let watchdog = Watchdog::arm(&tracefs, name).ok()?;
        let preparing = host_wide.then(|| PreparingInstance::begin(&tracefs, instance));
        Some(Armed {
            tracefs,
            watchdog: Some(watchdog),
            preparing,
        })
    }

    /// Tracefs opened and the watchdog forked now, reporting why not.
    pub fn now(name: &GroupName) -> crate::Result<Armed> {
        let tracefs = Tracefs::open()?;
        let watchdog = Watchdog::arm(&tracefs, name)?;
        Ok(Armed {
            tracefs,
            watchdog: Some(watchdog),
            preparing: None,
        })
    }

    /// The parts, for the session to take over (always `Some`: the parts are only taken here).
    pub fn into_parts(mut self) -> Option<(Tracefs, Watchdog, Option<PreparingInstance>)> {
        let (watchdog, preparing) = (self.watchdog.take()?, self.preparing.take());
        Some((self.tracefs.clone(), watchdog, preparing))
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        drop(self.preparing.take());
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.disarm();
        }
    }
}
