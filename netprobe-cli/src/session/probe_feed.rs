//! [`ProbeFeed`]: a tracing session beside a profile, on a thread of its own, handing its hits
//! over a channel (`profile --trigger`'s function, the goroutine view's `runtime.gopark`).
//!
//! The session pairs calls (entry and return probes; Go returns on each RET, paired by
//! goroutine), is scoped to the given processes (the per-task backend: probes in their memory
//! alone, never host-wide), and is built on the feed's thread because a session's backend
//! stays on the thread that placed it (it is armed on the caller's thread first: the watchdog
//! is forked while the process has one thread). Its errors (a bad spec, a pattern that matches nothing,
//! a refused probe) come back from [`ProbeFeed::start`] before anything is profiled. It stops
//! when [`ProbeFeed::finish`] sets the stop flag its sink reports
//! ([`crate::sinks::Sink::stop_requested`], asked on every turn of the event loop, at least
//! every 200 ms): the session then hands over what is buffered and removes its probes.
//!
//! A session installs the stop-signal handlers ([`crate::signals`]): Ctrl-C ends the feed's run
//! like the profile's, and the profile still sees the signal (the last signal is kept in one
//! place).

use super::{Options, Session, Target};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::plan::{Hit, ProbePlan};
use crate::profile::probed::HitFeed;
use crate::sinks::{Flow, Sink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The processes a feed probes.
#[derive(Clone, Debug)]
pub enum FeedTarget {
    /// Running processes.
    Pids(Vec<u32>),
    /// A command the feed's session starts, held before its first instruction until
    /// [`ProbeFeed::release`] (so a profile can open its own events on [`ProbeFeed::pids`]).
    Command { line: String, user: Option<String> },
}

/// A running feed of probe hits (see the module's documentation).
pub struct ProbeFeed {
    hits: Receiver<Hit>,
    stop: Arc<AtomicBool>,
    go: Option<Sender<()>>,
    thread: Option<JoinHandle<Result<()>>>,
    pids: Vec<u32>,
    plan: ProbePlan,
}

/// The sink on the feed's thread: every hit into the channel, and the stop flag.
struct Forward {
    tx: Sender<Hit>,
    stop: Arc<AtomicBool>,
}

impl Sink for Forward {
    fn hit(&mut self, _plan: &ProbePlan, hit: Hit) -> Flow {
        // A receiver gone means the feed was dropped: the loop ends at the stop flag.
        let _ = self.tx.send(hit);
        Flow::Continue
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

impl ProbeFeed {
    /// Places entry and return probes of `specs` on `target` and starts recording, with the
    /// user stack (and a copy of registers and stack top) under each hit when `stacks`. Running
    /// processes are recorded at once; a command runs from [`ProbeFeed::release`]. Call it
    /// while the process has a single thread: the session's watchdog (which removes the probes
    /// if netprobe is killed) is forked here ([`super::SessionBuilder::arm`]).
    pub fn start(target: FeedTarget, specs: &[String], stacks: bool) -> Result<ProbeFeed> {
        if specs.is_empty() {
            return Err(Error::usage("no probe spec given"));
        }
        let (target, held) = match target {
            FeedTarget::Pids(p) if p.is_empty() => {
                return Err(Error::usage("a probe feed needs processes: give -p or -c"))
            }
            FeedTarget::Pids(p) => (Target::Pids(p), false),
            FeedTarget::Command { line, user } => (Target::Command { line, user }, true),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, hits) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel::<Result<(Vec<u32>, ProbePlan)>>();
        let (go, go_rx) = mpsc::channel::<()>();
        let flag = stop.clone();
        // Armed here: the watchdog is forked while the caller has a single thread.
        let builder = Session::builder(Mode::Latency)
            .specs(specs)
            .target(target)
            .options(Options {
                stack: stacks,
                wake_on_every_hit: true,
                ..Options::default()
            })
            .arm();
        let thread = std::thread::Builder::new()
            .name("netprobe-feed".into())
            .spawn(move || -> Result<()> {
                let mut session = match builder.plan().and_then(|p| p.start()) {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok((s.pids().to_vec(), s.plan().clone())));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                // Held until released, or stopped before it ever ran.
                if !held || go_rx.recv().is_ok() {
                    let mut sink = Forward { tx, stop: flag };
                    session.run(&mut sink)?;
                }
                let stopped = session.stop()?;
                match stopped.leftovers()? {
                    (0, _) => Ok(()),
                    (n, _) => Err(Error::usage(format!(
                        "internal: {n} probe event(s) of the feed were left registered"
                    ))),
                }
            })
            .map_err(|e| Error::io("netprobe-feed thread", e))?;
        let (pids, plan) = match ready.recv() {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                return Err(match thread.join() {
                    Ok(Err(e)) => e,
                    _ => Error::usage("internal: the probe feed's thread ended before starting"),
                })
            }
        };
        Ok(ProbeFeed {
            hits,
            stop,
            go: held.then_some(go),
            thread: Some(thread),
            pids,
            plan,
        })
    }

    /// The processes probed (a command's pid once started).
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// The plan in place: functions, probes and their conventions (`Hit::function` indexes it).
    pub fn plan(&self) -> &ProbePlan {
        &self.plan
    }

    /// Lets a held command run (nothing for running processes).
    pub fn release(&mut self) {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
    }

    /// Moves the hits received so far into `out`, without waiting.
    pub fn take(&self, out: &mut Vec<Hit>) {
        out.extend(self.hits.try_iter());
    }

    /// Stops recording (within 200 ms), removes every probe (a held command is ended), and
    /// returns the hits not yet taken; an error of the session's run comes back here.
    pub fn finish(mut self) -> Result<Vec<Hit>> {
        self.stop_thread()?;
        Ok(self.hits.try_iter().collect())
    }

    fn stop_thread(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.go.take();
        match self.thread.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(Error::usage("internal: the probe feed's thread panicked")),
        }
    }
}

impl Drop for ProbeFeed {
    /// A feed dropped without [`ProbeFeed::finish`] still stops and removes its probes.
    fn drop(&mut self) {
        let _ = self.stop_thread();
    }
}

impl HitFeed for ProbeFeed {
    fn take(&self, out: &mut Vec<Hit>) {
        ProbeFeed::take(self, out)
    }

    fn release(&mut self) {
        ProbeFeed::release(self)
    }

    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    fn finish(self: Box<Self>) -> Result<Vec<Hit>> {
        ProbeFeed::finish(*self)
    }
}
