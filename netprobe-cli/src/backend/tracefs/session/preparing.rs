//! A session's instance made on a thread of its own while the caller resolves the plan: the
//! kernel's waits (the trace clock, the buffers) overlap the caller's work.

use super::SessionOptions;
use crate::backend::tracefs::instance::Instance;
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};

/// Creates the instance of a session with `opts` and sets what does not depend on its plan: the
/// clock, overwrite off, the buffer size and wake-up threshold, `record-tgid`. The kernel makes
/// this slow (`trace_clock` waits for an RCU grace period before it resets the buffers, and the
/// buffers are allocated: 30-60 ms here, BENCHMARKS.md, "Time until a probe is live"), hence
/// [`PreparingInstance`]. On error, an instance it created is removed.
pub(super) fn prepare_instance(tracefs: &Tracefs, opts: &SessionOptions) -> Result<Instance> {
    let inst = Instance::create(tracefs, &opts.name)?;
    let set = || -> Result<()> {
        inst.set_clock("mono")?;
        inst.set_overwrite(false)?;
        inst.set_buffer_size_kb(opts.buffer_kb)?;
        inst.set_buffer_percent(opts.buffer_percent)?;
        // The kernel then keeps a tid → tgid table (`saved_tgids`) that outlives short processes;
        // best effort: output falls back to /proc.
        let _ = inst.write("options/record-tgid", "1");
        Ok(())
    };
    match set() {
        Ok(()) => Ok(inst),
        Err(e) => {
            // The error that stopped the start matters more than a failed removal.
            let _ = crate::backend::tracefs::instance::remove_dir(inst.dir());
            Err(e)
        }
    }
}

/// A session's instance being created and set up on a thread of its own
/// (`prepare_instance`), so that the kernel's waits overlap the caller's work (resolving the
/// plan). [`Session::start_prepared`] takes it over; dropped before that, it waits for the
/// thread and removes the instance it made, so nothing is left whatever stops the caller.
#[derive(Debug)]
pub struct PreparingInstance {
    state: Option<Preparing>,
}

#[derive(Debug)]
enum Preparing {
    Thread(std::thread::JoinHandle<Result<Instance>>),
    /// No thread could be started: made in place.
    Made(Result<Instance>),
}

impl PreparingInstance {
    /// Starts creating the instance of a session with `opts` (`opts.pids` is not used: the pid
    /// filter is set when the session starts). Errors are reported when the session starts
    /// ([`Session::start_prepared`]).
    pub fn begin(tracefs: &Tracefs, opts: &SessionOptions) -> PreparingInstance {
        let state = match std::thread::Builder::new()
            .name("netprobe-inst".into())
            .spawn({
                let (tracefs, opts) = (tracefs.clone(), opts.clone());
                move || prepare_instance(&tracefs, &opts)
            }) {
            Ok(thread) => Preparing::Thread(thread),
            Err(_) => Preparing::Made(prepare_instance(tracefs, opts)),
        };
        PreparingInstance { state: Some(state) }
    }

    /// The instance once it is ready; the error that stopped it otherwise (nothing left).
    pub(super) fn finish(mut self) -> Result<Instance> {
        match self.state.take() {
            Some(Preparing::Thread(t)) => match t.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Some(Preparing::Made(result)) => result,
            None => Err(Error::Usage(
                "internal: the instance was taken twice".into(),
            )),
        }
    }
}

impl Drop for PreparingInstance {
    fn drop(&mut self) {
        let made = match self.state.take() {
            Some(Preparing::Thread(t)) => t.join().ok(),
            Some(Preparing::Made(result)) => Some(result),
            None => None,
        };
        if let Some(Ok(inst)) = made {
            let _ = inst.remove();
        }
    }
}
