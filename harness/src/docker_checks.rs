//! THE table of Docker checks: an app in a container, netprobe tracing it from the sidecar (in
//! the app's PID namespace, through `/proc/PID/root`) or from the host (through the container's
//! host pid), while the test drives the app. Each row asserts hits == calls made and decoded
//! arguments == values sent, read by [`crate::checks::evaluate`] like the kernel checks.
//!
//! To add a check, add a row to [`DOCKER_CHECKS`]; `tests/docker_checks_e2e.rs` makes a trial of each.

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
    /// The sample .NET app (`sample-app/dotnet/`, built with `run.sh --build-only`) on the .NET
    /// runtime of this major version, at `/app/sample-netcore-app.dll`, tiering off (every call
    /// of a ReadyToRun method hits).
    Dotnet {
        /// `"8"` or `"3.1"` (a root under `$NETPROBE_CACHE/dotnet/`).
        major: &'static str,
        /// The app's arguments (mode and options); `{port}` is a free port.
        args: &'static [&'static str],
    },
    /// The Go sample app (`sample-app/go/build.sh`'s `sampleapp-default`, static) at
    /// `/app/sampleapp`.
    GoSample {
        /// The app's arguments; `{port}` is a free port.
        args: &'static [&'static str],
    },
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
    /// `GET path` on the app this many times (after `warmup`, sent before netprobe starts, e.g.
    /// to make the app load the assembly that holds the probed method).
    Http {
        /// Request path.
        path: &'static str,
        /// Requests sent.
        times: u32,
        /// A request sent once before tracing starts, if any.
        warmup: Option<&'static str>,
    },
    /// Nothing: the app makes its calls by itself once its start delay is over.
    AppDriven,
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
    /// Text the app prints on stdout when it is ready.
    pub ready: &'static str,
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

/// Expectations shared by the trace rows (each row sets function, hits and arguments).
const TRACE_EXPECT: KernelCheck = KernelCheck {
    name: "docker",
    what: "",
    subcommand: "trace",
    target: None,
    args: &[],
    reading: Reading::JsonHits,
    function: "",
    hits: None,
    arg_values: &[],
    timeout_secs: 90,
    background: None,
    offsets_of: &[],
};

/// The Go sample service on the test's port.
const GO_SERVE: App = App::GoSample {
    args: &["serve", "-addr", "127.0.0.1:{port}"],
};
/// The .NET sample service on the test's port (`serve` mode of sample-app/dotnet).
const DOTNET_SERVE: &[&str] = &["serve", "--port", "{port}"];
/// The .NET sample's sleep mode: after 6 s (netprobe attaches meanwhile), 5 calls of
/// Thread.Sleep(7) through a delegate (a direct call is inlined on 3.1: 0 hits).
const DOTNET_SLEEP: &[&str] = &[
    "sleep",
    "--count",
    "5",
    "--ms",
    "7",
    "--call",
    "delegate",
    "--delay-ms",
    "6000",
];

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
        ready: "ready pid=",
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
        ready: "ready pid=",
        expect: FIXTURE_EXPECT,
    },
    DockerCheck {
        name: "go_echo_sidecar",
        what: "Go sample app; sidecar traces main.Echo(string) while the host sends GET /echo",
        app: GO_SERVE,
        vantage: Vantage::Sidecar,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "3", "--duration", "60",
            "{app}:main.Echo msg=gostring",
        ],
        drive: Drive::Http { path: "/echo?msg=netprobe-harness", times: 3, warmup: None },
        ready: "listening on",
        expect: KernelCheck {
            function: "main.Echo",
            hits: Some(3),
            arg_values: &[("msg", "netprobe-harness")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "go_echo_host",
        what: "Go sample app; the host traces main.Echo(string) while it sends GET /echo",
        app: GO_SERVE,
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "3", "--duration", "60",
            "{app}:main.Echo msg=gostring",
        ],
        drive: Drive::Http { path: "/echo?msg=netprobe-harness", times: 3, warmup: None },
        ready: "listening on",
        expect: KernelCheck {
            function: "main.Echo",
            hits: Some(3),
            arg_values: &[("msg", "netprobe-harness")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "go_fib_host",
        what: "Go sample app; the host traces main.Fib(int) while it sends GET /fib",
        app: GO_SERVE,
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "4", "--duration", "60",
            "{app}:main.Fib n=s64",
        ],
        drive: Drive::Http { path: "/fib?n=23", times: 4, warmup: None },
        ready: "listening on",
        expect: KernelCheck {
            function: "main.Fib",
            hits: Some(4),
            arg_values: &[("n", "23")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "dotnet8_echo_sidecar",
        what: ".NET 8 sample app; sidecar traces Uri::UnescapeDataString(string) (R2R, called once per GET /echo with the value)",
        app: App::Dotnet { major: "8", args: DOTNET_SERVE },
        vantage: Vantage::Sidecar,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "3", "--duration", "60",
            "System.Private.Uri.dll:System.Uri::UnescapeDataString s=utf16",
        ],
        drive: Drive::Http { path: "/echo/netprobe-harness", times: 3, warmup: Some("/echo/warmup") },
        ready: "listening",
        expect: KernelCheck {
            function: "UnescapeDataString",
            hits: Some(3),
            arg_values: &[("s", "netprobe-harness")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "dotnet8_sleep_host",
        what: ".NET 8 sample app (sleep mode); the host traces Thread::Sleep(int32): 5 calls of 7 ms",
        app: App::Dotnet { major: "8", args: DOTNET_SLEEP },
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "5", "--duration", "60",
            "System.Private.CoreLib.dll:System.Threading.Thread::Sleep ms=s32",
        ],
        drive: Drive::AppDriven,
        ready: "pid=",
        expect: KernelCheck {
            function: "Sleep",
            hits: Some(5),
            arg_values: &[("ms", "7")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "dotnet31_echo_host",
        what: ".NET Core 3.1 sample app; the host traces Uri::UnescapeDataString(string) while it sends GET /echo",
        app: App::Dotnet { major: "3.1", args: DOTNET_SERVE },
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "3", "--duration", "60",
            "System.Private.Uri.dll:System.Uri::UnescapeDataString s=utf16",
        ],
        drive: Drive::Http { path: "/echo/netprobe-harness", times: 3, warmup: Some("/echo/warmup") },
        ready: "listening",
        expect: KernelCheck {
            function: "UnescapeDataString",
            hits: Some(3),
            arg_values: &[("s", "netprobe-harness")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "dotnet31_sleep_host",
        what: ".NET Core 3.1 sample app (sleep mode, via delegate: a direct call is inlined on 3.1); the host traces Thread::Sleep(int32)",
        app: App::Dotnet { major: "3.1", args: DOTNET_SLEEP },
        // Not the sidecar: the sleep mode exits when done, and when a PID namespace's first
        // process exits the kernel kills every process in it, the sidecar's netprobe included.
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "5", "--duration", "60",
            "System.Private.CoreLib.dll:System.Threading.Thread::Sleep ms=s32",
        ],
        drive: Drive::AppDriven,
        ready: "pid=",
        expect: KernelCheck {
            function: "Sleep",
            hits: Some(5),
            arg_values: &[("ms", "7")],
            ..TRACE_EXPECT
        },
    },
    DockerCheck {
        name: "dotnet8_echo_host",
        what: ".NET 8 sample app; the host traces Uri::UnescapeDataString(string) while it sends GET /echo",
        app: App::Dotnet { major: "8", args: DOTNET_SERVE },
        vantage: Vantage::Host,
        args: &[
            "trace", "--json", "-p", "{pid}", "--max-events", "3", "--duration", "60",
            "System.Private.Uri.dll:System.Uri::UnescapeDataString s=utf16",
        ],
        drive: Drive::Http { path: "/echo/netprobe-harness", times: 3, warmup: Some("/echo/warmup") },
        ready: "listening",
        expect: KernelCheck {
            function: "UnescapeDataString",
            hits: Some(3),
            arg_values: &[("s", "netprobe-harness")],
            ..TRACE_EXPECT
        },
    },
];
