//! THE table of Docker checks: an app in a container, netprobe tracing it from the sidecar (in
//! the app's PID namespace, through `/proc/PID/root`) or from the host (through the container's
//! host pid), while the test drives the app. Each row asserts hits == calls made and decoded
//! arguments == values sent, read by [`crate::checks::evaluate`] like the kernel checks.
//!
//! To add a check, add a row to [`DOCKER_CHECKS`]; `tests/docker_e2e.rs` makes a trial of each.

use crate::checks::{KernelCheck, Reading};

/// The app under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// `fixtures/c/harness_calls.c` built `-static`, run as
    /// `harness_calls --on-signal COUNT A B` (FROM scratch image).
    CFixture {
        /// Calls per round.
        count: u32,
        /// First argument of every call.
        a: i64,
        /// Second argument of every call.
        b: i64,
    },
    /// The sample .NET app (`sample-app/dotnet/`) on the .NET runtime of this major version.
    Dotnet {
        /// `"8"` or `"3.1"` (a root under `$NETPROBE_CACHE/dotnet/`).
        major: &'static str,
    },
    /// The Go sample app (`sample-app/go/`), static.
    GoSample,
}

/// Where netprobe runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vantage {
    /// In the sidecar container that shares the app's PID namespace (the app is pid 1 there).
    Sidecar,
    /// On the host, through the app container's host pid.
    Host,
}

/// What the test does while netprobe traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drive {
    /// `kill -USR1 <pid>` this many times (the C fixture makes COUNT calls per signal).
    Signal {
        /// Signals sent.
        rounds: u32,
    },
    /// `GET path` on the app this many times.
    Http {
        /// Request path.
        path: &'static str,
        /// Requests sent.
        times: u32,
    },
}

/// One Docker check.
#[derive(Clone, Copy, Debug)]
pub struct DockerCheck {
    /// Trial name.
    pub name: &'static str,
    /// What it proves.
    pub what: &'static str,
    /// The app.
    pub app: App,
    /// Where netprobe runs.
    pub vantage: Vantage,
    /// netprobe's arguments: `{pid}` is the app's pid as the vantage sees it, `{app}` the app's
    /// program path inside its container (as `/proc/{pid}/maps` shows it: netprobe reaches the
    /// file itself through `/proc/{pid}/root`), `{root}` is `/proc/{pid}/root`.
    pub args: &'static [&'static str],
    /// What the test does meanwhile.
    pub drive: Drive,
    /// The expectations, judged like a kernel check (subcommand, reading, function, hits,
    /// arguments, time limit; `args`/`target` of it are unused).
    pub expect: KernelCheck,
}

const FIXTURE: App = App::CFixture {
    count: 3,
    a: 7,
    b: 12345,
};

const FIXTURE_EXPECT: KernelCheck = KernelCheck {
    name: "fixture",
    what: "",
    subcommand: "trace",
    target: None,
    args: &[],
    reading: Reading::JsonHits,
    function: "np_harness_add",
    // FIXTURE.count calls per round, 2 rounds.
    hits: Some(6),
    arg_values: &[("a", "7"), ("b", "12345")],
    timeout_secs: 90,
    background: None,
    offsets_of: &[],
};

/// Every Docker check, in order.
pub const DOCKER_CHECKS: &[DockerCheck] = &[
    DockerCheck {
        name: "fixture_sidecar_trace",
        what: "static C app; netprobe in the sidecar traces it by pid (pid 1, its files via /proc/1/root)",
        app: FIXTURE,
        vantage: Vantage::Sidecar,
        args: &[
            "trace",
            "--json",
            "-p",
            "{pid}",
            "--max-events",
            "6",
            "--duration",
            "60",
            "{app}:np_harness_add a=s64 b=s64",
        ],
        drive: Drive::Signal { rounds: 2 },
        expect: FIXTURE_EXPECT,
    },
    DockerCheck {
        name: "fixture_host_trace",
        what: "static C app; netprobe on the host traces it through the container's host pid",
        app: FIXTURE,
        vantage: Vantage::Host,
        args: &[
            "trace",
            "--json",
            "-p",
            "{pid}",
            "--max-events",
            "6",
            "--duration",
            "60",
            "{app}:np_harness_add a=s64 b=s64",
        ],
        drive: Drive::Signal { rounds: 2 },
        expect: FIXTURE_EXPECT,
    },
];
