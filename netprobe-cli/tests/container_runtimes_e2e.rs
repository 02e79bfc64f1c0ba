//! End-to-end tests of containers that Docker did not make: containerd's (namespaces `moby` and
//! `k8s.io`, through `ctr`, on the daemon of `scripts/containerd-up.sh`) and Podman's. The Go
//! sample app runs in each from an image archive the harness writes
//! (`harness::runtimes::archive`, imported, never pulled), as `container_e2e` runs it in Docker:
//! `workload -wait` holds its calls until a line on stdin, so probes are placed first.
//!
//! - `trace --container NAME` gives exactly the calls the workload made (its own summary says
//!   how many), and `ps --json` lists the container's processes with the id, engine, name and
//!   containerd namespace that `ctr containers info` / `podman inspect` give;
//! - a pod of two containers labelled as the kubelet labels them is selected whole by
//!   `--pod NAMESPACE/NAME` and by `--selector`, each record naming namespace, pod and container;
//!   a selector that matches nothing is a one-line error;
//! - a runtime whose state refuses access (netprobe as nobody) or is absent (a mount namespace
//!   with empty state folders) costs one note line, not the listing.
//!
//! Root, tracefs, Go, `ctr` with a containerd (started here when none answers) and `podman`.

use fixtures::e2e::{self, err, json_lines, text, Need};
use fixtures::live::Waiting;
use fixtures::netprobe;
use harness::owner::Owner;
use harness::runtimes::{
    archive, containerd, podman, CtrContainer, KubeletLabels, PodmanContainer,
};
use serde_json::Value as Json;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";
/// Workload rounds: Add3(i, 10i, 100i) for i = 0..ROUNDS-1.
const ROUNDS: usize = 5;
const ADD3: &str = "main.Add3 a=s64 b=s64 c=s64";
/// The pod of the `--pod`/`--selector` trial, as `kubectl get pods -n shop` would show it.
const POD_NAMESPACE: &str = "shop";
const POD_NAME: &str = "checkout-7d4";
/// Held by a trial while its pod runs: trials run on parallel threads, and two pods of one name
/// would be one pod of four containers.
static POD: std::sync::Mutex<()> = std::sync::Mutex::new(());

type R = Result<(), String>;

fn h<T>(r: anyhow::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{e:#}"))
}

fn expect(ok: bool, what: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// `sampleapp workload -n N -wait`.
fn workload(rounds: usize) -> Vec<String> {
    [
        "/app/sampleapp",
        "workload",
        "-n",
        &rounds.to_string(),
        "-wait",
    ]
    .map(String::from)
    .into()
}

/// A container of one runtime running the workload, held before its calls, and what its
/// runtime's own tool says of it.
struct Running {
    /// `ctr run` / `podman run -i` in the foreground: the workload's stdin and stdout.
    app: Waiting,
    /// The first process, in the initial pid namespace.
    pid: u32,
    /// Every process of the container (`ctr task ps`; Podman's: the first).
    pids: Vec<u32>,
    /// What the runtime says: full id, engine, the name netprobe should show, the containerd
    /// namespace.
    id: String,
    engine: &'static str,
    name: String,
    namespace: Option<String>,
    /// Dropped after `app` (fields drop in order): the container goes after its client.
    _guard: Guard,
}

/// A container's guard (`CtrContainer`, `PodmanContainer`): it removes the container when dropped.
type Guard = Box<dyn Send>;

/// Whether the runtime still lists the container (it should not once its guard dropped).
fn still_listed(engine: &str, namespace: Option<&str>, id: &str) -> Result<bool, String> {
    let out = match engine {
        "containerd" => h(containerd::ctr(
            namespace.unwrap_or("default"),
            &["containers", "ls", "-q"],
        ))?,
        _ => h(podman::podman(&["ps", "-a", "-q", "--no-trunc"]))?,
    };
    Ok(out.lines().any(|l| l.trim() == id))
}

/// The image, imported into containerd's `namespace` (and the daemon up), once per process.
fn ctr_image(namespace: &str) -> Result<String, String> {
    h(containerd::ensure_daemon())?;
    let image = h(archive::go_sample_app())?;
    h(containerd::import(namespace, &image))
}

fn podman_image() -> Result<String, String> {
    let image = h(archive::go_sample_app())?;
    h(podman::load(&image))
}

/// Runs the workload (`rounds`) in containerd's `namespace` with `labels`; held at its `ready`.
fn start_ctr(
    namespace: &str,
    role: &str,
    labels: Vec<(String, String)>,
    name: &str,
    rounds: usize,
) -> Result<Running, String> {
    let image = ctr_image(namespace)?;
    let guard = CtrContainer::new(namespace, Owner::current(), role);
    let cmd = workload(rounds);
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let app = Waiting::start(&mut guard.run_command(&image, &labels, false, &argv))?;
    let pid = h(guard.task_pid())?;
    let pids = h(guard.pids())?;
    let info = h(guard.info())?;
    Ok(Running {
        app,
        pid,
        pids,
        id: info["ID"].as_str().unwrap_or_default().to_string(),
        engine: "containerd",
        name: name.to_string(),
        namespace: Some(namespace.to_string()),
        _guard: Box::new(guard),
    })
}

fn start_podman(role: &str, rounds: usize) -> Result<Running, String> {
    let image = podman_image()?;
    let guard = PodmanContainer::new(Owner::current(), role);
    let cmd = workload(rounds);
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let app = Waiting::start(&mut guard.run_command(&image, &[], false, &argv))?;
    let info = h(guard.inspect())?;
    let pid = info["State"]["Pid"].as_u64().unwrap_or_default() as u32;
    Ok(Running {
        app,
        pid,
        pids: vec![pid],
        id: info["Id"].as_str().unwrap_or_default().to_string(),
        engine: "podman",
        name: info["Name"].as_str().unwrap_or_default().to_string(),
        namespace: None,
        _guard: Box::new(guard),
    })
}

/// `ps --json`'s objects.
fn ps_json(cmd: &mut Command) -> Result<(Vec<Json>, String), String> {
    let out = cmd.output().map_err(err)?;
    let stderr = text(&out.stderr);
    if !out.status.success() {
        return Err(format!("ps --json failed ({}): {stderr}", out.status));
    }
    Ok((json_lines(&out.stdout), stderr))
}

/// `ps --json` names the container of each of `c.pids` as its runtime does: id, engine, name
/// and (for containerd) namespace; and `ps` shows `ID12 (NAME)` on its line, as for Docker.
fn ps_names(c: &Running) -> R {
    let (entries, stderr) = ps_json(netprobe::command().args(["ps", "--json"]))?;
    expect(c.pids.contains(&c.pid), || {
        format!("{} lists pids {:?} without {}", c.engine, c.pids, c.pid)
    })?;
    for pid in &c.pids {
        let e = entries
            .iter()
            .find(|e| e["pid"] == *pid)
            .ok_or_else(|| format!("pid {pid} is not listed by ps --json: {stderr}"))?;
        let ct = &e["container"];
        expect(
            ct["id"] == c.id.as_str()
                && ct["engine"] == c.engine
                && ct["name"] == c.name.as_str()
                && c.namespace
                    .as_deref()
                    .is_none_or(|ns| ct["namespace"] == ns),
            || {
                format!(
                    "pid {pid}: expected {} {} {:?} {:?}: {e}",
                    c.engine, c.id, c.name, c.namespace
                )
            },
        )?;
    }
    let out = netprobe::command().arg("ps").output().map_err(err)?;
    let line = text(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&c.pid.to_string()))
        .map(str::to_string)
        .ok_or_else(|| format!("pid {} is not listed by ps", c.pid))?;
    expect(
        line.contains(&format!("{} ({}", &c.id[..12], c.name)),
        || format!("ps line of pid {}: {line:?}", c.pid),
    )
}

/// The name, pod and namespace a trace/count record gives its container: `container` as a
/// string or an object with `name`; `pod` as a string or an object with `namespace`, `name`,
/// `container`; `namespace` at the top or in `pod`.
fn placement(rec: &Json) -> (Option<String>, Option<String>, Option<String>) {
    let s = |v: &Json| v.as_str().map(str::to_string);
    let container = s(&rec["container"])
        .or_else(|| s(&rec["pod"]["container"]))
        .or_else(|| s(&rec["container"]["pod"]["container"]))
        .or_else(|| s(&rec["container"]["name"]));
    let pod = s(&rec["pod"])
        .or_else(|| s(&rec["pod"]["name"]))
        .or_else(|| s(&rec["container"]["pod"]["name"]));
    let namespace = s(&rec["namespace"])
        .or_else(|| s(&rec["pod"]["namespace"]))
        .or_else(|| s(&rec["container"]["pod"]["namespace"]));
    (container, pod, namespace)
}

/// Lets every app make its calls and checks each printed `Add3 calls=N`.
fn run_workloads(apps: Vec<(Waiting, usize)>) -> R {
    for (mut app, rounds) in apps {
        let rest = app.go()? + &app.finish();
        expect(rest.contains(&format!("Add3 calls={rounds} ")), || {
            format!("the workload did not finish: {rest}")
        })?;
    }
    Ok(())
}

/// Waits for netprobe to end by itself once its targets are gone (at most 20 s, then SIGINT,
/// which ends a session as a user's Ctrl-C does); its stdout, stderr, and any tracefs leftover.
fn finish_netprobe(
    mut child: Child,
    stderr: std::thread::JoinHandle<String>,
) -> Result<(String, String), String> {
    let np_pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().map_err(err)?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().map_err(err)?.is_none() {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(np_pid as i32, libc::SIGINT) };
    }
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    if !out.status.success() {
        return Err(format!("netprobe exited with {}: {stderr}", out.status));
    }
    Ok((text(&out.stdout), stderr))
}

/// `trace --json --container NAME main.Add3`: one record per call, in order (a = 0..ROUNDS-1),
/// each naming the container; `ps` names it before.
fn traced_by_name(c: Running) -> R {
    ps_names(&c)?;
    let (child, stderr) = fixtures::live::spawn_until_live(
        netprobe::command().args([
            "trace",
            "--json",
            "--container",
            &c.name,
            ADD3,
            "--duration",
            "120s",
        ]),
        Duration::from_secs(60),
    )?;
    let Running {
        app,
        name,
        id,
        engine,
        namespace,
        _guard,
        ..
    } = c;
    run_workloads(vec![(app, ROUNDS)])?;
    let (stdout, stderr) = finish_netprobe(child, stderr)?;
    let hits: Vec<Json> = json_lines(stdout.as_bytes())
        .into_iter()
        .filter(|h| h["function"] == "main.Add3")
        .collect();
    let args: Vec<i64> = hits
        .iter()
        .filter_map(|h| h["args"]["a"].as_i64())
        .collect();
    expect(args == (0..ROUNDS as i64).collect::<Vec<_>>(), || {
        format!("{engine} --container {name}: Add3 a= {args:?}, expected 0..{ROUNDS}: {stdout} {stderr}")
    })?;
    for h in &hits {
        expect(placement(h).0.as_deref() == Some(name.as_str()), || {
            format!("a record does not name container {name}: {h}")
        })?;
    }
    expect(stderr.contains(&format!("container {name} (")), || {
        format!("the container's pids are not said: {stderr}")
    })?;
    drop(_guard);
    expect(!still_listed(engine, namespace.as_deref(), &id)?, || {
        format!("{engine} container {id} left behind")
    })
}

fn containerd_container_traced_by_name(namespace: &'static str) -> impl FnOnce() -> R {
    move || {
        let role = format!("rt-{}", namespace.replace('.', ""));
        let name = Owner::current().container_name(&role);
        let labels = vec![("nerdctl/name".to_string(), name.clone())];
        traced_by_name(start_ctr(namespace, &role, labels, &name, ROUNDS)?)
    }
}

fn podman_container_traced_by_name() -> R {
    traced_by_name(start_podman("rt-podman", ROUNDS)?)
}

/// The two containers of pod shop/checkout-7d4 (kubelet labels, `app=checkout`) in
/// containerd's `k8s.io`, with 3 and 4 rounds.
fn start_pod() -> Result<Vec<(Running, usize)>, String> {
    let uid = "5f0c4a8e-2b1d-4c3e-9a7f-0d6b8e1c2a34";
    let mut pod = Vec::new();
    for (container, rounds) in [("web", 3), ("worker", 4)] {
        let labels = KubeletLabels {
            namespace: POD_NAMESPACE.into(),
            pod: POD_NAME.into(),
            uid: uid.into(),
            container: container.into(),
            pod_labels: vec![("app".into(), "checkout".into())],
        };
        let c = start_ctr(
            "k8s.io",
            &format!("pod-{container}"),
            labels.labels(),
            container,
            rounds,
        )?;
        pod.push((c, rounds));
    }
    Ok(pod)
}

/// `trace --pod shop/checkout-7d4`: the calls of both containers, each record naming namespace,
/// pod and container; `ps --json` gives each container its pod.
fn pod_traced_whole() -> R {
    let _one_pod = POD.lock().unwrap_or_else(|e| e.into_inner());
    let pod = start_pod()?;
    let (entries, _) = ps_json(netprobe::command().args(["ps", "--json"]))?;
    for (c, _) in &pod {
        let e = entries
            .iter()
            .find(|e| e["pid"] == c.pid)
            .ok_or_else(|| format!("pid {} not listed by ps --json", c.pid))?;
        let p = &e["container"]["pod"];
        expect(
            e["container"]["id"] == c.id.as_str()
                && p["namespace"] == POD_NAMESPACE
                && p["name"] == POD_NAME
                && p["container"] == c.name.as_str(),
            || format!("ps --json of pod container {}: {e}", c.name),
        )?;
    }
    let (child, stderr) = fixtures::live::spawn_until_live(
        netprobe::command().args([
            "trace",
            "--json",
            "--pod",
            &format!("{POD_NAMESPACE}/{POD_NAME}"),
            ADD3,
            "--duration",
            "120s",
        ]),
        Duration::from_secs(60),
    )?;
    let apps = pod
        .into_iter()
        .map(|(c, n)| ((c.app, n), c._guard))
        .collect::<Vec<_>>();
    let (apps, guards): (Vec<_>, Vec<_>) = apps.into_iter().unzip();
    run_workloads(apps)?;
    let (stdout, stderr) = finish_netprobe(child, stderr)?;
    drop(guards);
    let hits: Vec<Json> = json_lines(stdout.as_bytes())
        .into_iter()
        .filter(|h| h["function"] == "main.Add3")
        .collect();
    for (container, rounds) in [("web", 3), ("worker", 4)] {
        let n = hits
            .iter()
            .filter(|h| {
                placement(h)
                    == (
                        Some(container.into()),
                        Some(POD_NAME.into()),
                        Some(POD_NAMESPACE.into()),
                    )
            })
            .count();
        expect(n == rounds, || {
            format!("--pod: {n} Add3 records name {POD_NAMESPACE}/{POD_NAME}/{container}, expected {rounds}: {stdout} {stderr}")
        })?;
    }
    expect(hits.len() == 7, || {
        format!("--pod: {} records, expected 7: {stdout}", hits.len())
    })
}

/// The sum of `function`'s counts over `count --json`'s records (one total, or one per
/// container).
fn counted(stdout: &str, function: &str) -> u64 {
    json_lines(stdout.as_bytes())
        .iter()
        .filter_map(|j| j["counts"][function].as_u64())
        .sum()
}

/// `count --selector app=checkout` and `count --pod checkout-7d4` (any namespace) both count
/// the calls of both containers.
fn pod_counted_by_selector_and_name() -> R {
    let _one_pod = POD.lock().unwrap_or_else(|e| e.into_inner());
    for selection in [["--selector", "app=checkout"], ["--pod", POD_NAME]] {
        let pod = start_pod()?;
        let (child, stderr) = fixtures::live::spawn_until_live(
            netprobe::command()
                .args(["count", "--json"])
                .args(selection)
                .args([ADD3, "--duration", "120s"]),
            Duration::from_secs(60),
        )?;
        let (apps, guards): (Vec<_>, Vec<_>) =
            pod.into_iter().map(|(c, n)| ((c.app, n), c._guard)).unzip();
        run_workloads(apps)?;
        let (stdout, stderr) = finish_netprobe(child, stderr)?;
        drop(guards);
        let n = counted(&stdout, "main.Add3");
        expect(n == 7, || {
            format!("count {selection:?}: main.Add3 {n}, expected 3 + 4: {stdout} {stderr}")
        })?;
        // Per container: each of the pod's two names the pod, and their calls add up.
        let mut per_container = Vec::new();
        for rec in json_lines(stdout.as_bytes()) {
            for c in rec["containers"].as_array().into_iter().flatten() {
                let (container, pod, ns) = placement(c);
                expect(
                    pod.as_deref() == Some(POD_NAME) && ns.as_deref() == Some(POD_NAMESPACE),
                    || format!("count {selection:?}: a container does not name the pod: {rec}"),
                )?;
                per_container.push((container, c["counts"]["main.Add3"].as_u64()));
            }
        }
        per_container.sort();
        expect(
            per_container.len() == 2
                && per_container.iter().filter_map(|(_, n)| *n).sum::<u64>() == 7,
            || {
                format!("count {selection:?}: per container {per_container:?}, expected both containers of the pod, 3 + 4: {stdout}")
            },
        )?;
    }
    Ok(())
}

/// `latency --json --pod shop/checkout-7d4`: one record per container of the pod, naming its
/// container, pod and namespace, with that container's completed calls (3 and 4).
fn pod_timed_per_container() -> R {
    let _one_pod = POD.lock().unwrap_or_else(|e| e.into_inner());
    let pod = start_pod()?;
    let (child, stderr) = fixtures::live::spawn_until_live(
        netprobe::command()
            .args(["latency", "--json", "--pod"])
            .arg(format!("{POD_NAMESPACE}/{POD_NAME}"))
            .args(["main.Add3", "--duration", "120s"]),
        Duration::from_secs(60),
    )?;
    let (apps, guards): (Vec<_>, Vec<_>) =
        pod.into_iter().map(|(c, n)| ((c.app, n), c._guard)).unzip();
    let calls: Vec<usize> = apps.iter().map(|(_, n)| *n).collect();
    run_workloads(apps)?;
    let (stdout, stderr) = finish_netprobe(child, stderr)?;
    drop(guards);
    let mut per_container: Vec<(Option<String>, u64)> = Vec::new();
    for rec in json_lines(stdout.as_bytes()) {
        let (container, pod, ns) = placement(&rec);
        expect(
            rec["function"] == "main.Add3"
                && pod.as_deref() == Some(POD_NAME)
                && ns.as_deref() == Some(POD_NAMESPACE),
            || format!("latency: a record does not name the pod: {rec} {stderr}"),
        )?;
        per_container.push((container, rec["count"].as_u64().unwrap_or(0)));
    }
    per_container.sort();
    let mut got: Vec<u64> = per_container.iter().map(|(_, n)| *n).collect();
    got.sort_unstable();
    let mut want: Vec<u64> = calls.iter().map(|&n| n as u64).collect();
    want.sort_unstable();
    expect(per_container.len() == 2 && got == want, || {
        format!("latency: per container {per_container:?}, expected {want:?}: {stdout} {stderr}")
    })
}

/// A selector or pod that matches no container: exit status non-zero, one line on stderr.
fn selection_matching_nothing_is_one_line() -> R {
    let none = format!("app=none-{}", std::process::id());
    for args in [
        ["count", "--selector", none.as_str(), ADD3],
        ["trace", "--pod", "shop/no-such-pod-7d4", ADD3],
    ] {
        let out = netprobe::output(&args)?;
        let stderr = text(&out.stderr);
        expect(
            !out.status.success() && stderr.trim_end().lines().count() == 1,
            || format!("{args:?}: {} {stderr:?}", out.status),
        )?;
    }
    Ok(())
}

/// netprobe as nobody: containerd's and Podman's state refuse it. `ps --json` still lists the
/// containers' processes with their ids (from their cgroups), and each runtime costs at most
/// one note line. With the runtimes' state folders empty (a private mount namespace: the
/// runtimes look absent), likewise.
fn runtime_refused_or_absent_is_a_note() -> R {
    let name = Owner::current().container_name("rt-refused");
    let ctr = start_ctr(
        "moby",
        "rt-refused",
        vec![("nerdctl/name".into(), name.clone())],
        &name,
        1,
    )?;
    let pm = start_podman("rt-refused-podman", 1)?;
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let mut as_nobody = Command::new("setpriv");
    as_nobody
        .args(nobody)
        .arg(netprobe::bin())
        .args(["ps", "--json"]);
    let hide = "mount -t tmpfs none /var/lib/containerd && mount -t tmpfs none /run/containerd \
                && mount -t tmpfs none /var/lib/containers && mount -t tmpfs none /run/containers \
                && exec \"$0\" ps --json";
    let mut absent = Command::new("unshare");
    absent.args(["-m", "sh", "-c", hide, netprobe::bin()]);
    for (how, cmd) in [("refused", &mut as_nobody), ("absent", &mut absent)] {
        let (entries, stderr) = ps_json(cmd).map_err(|e| format!("{how}: {e}"))?;
        for c in [&ctr, &pm] {
            let e = entries
                .iter()
                .find(|e| e["pid"] == c.pid)
                .ok_or_else(|| format!("{how}: pid {} not listed: {stderr}", c.pid))?;
            expect(e["container"]["id"] == c.id.as_str(), || {
                format!("{how}: pid {} lacks its container id {}: {e}", c.pid, c.id)
            })?;
            let notes = stderr.lines().filter(|l| l.contains(c.engine)).count();
            expect(notes <= 1, || {
                format!("{how}: {notes} lines about {}: {stderr}", c.engine)
            })?;
        }
        if how == "refused" {
            for runtime in ["containerd", "podman"] {
                expect(stderr.lines().any(|l| l.contains(runtime)), || {
                    format!("refused: no note about {runtime}: {stderr}")
                })?;
            }
        }
    }
    run_workloads(vec![(ctr.app, 1), (pm.app, 1)])
}

/// The daemon of `scripts/containerd-up.sh`, started when none answers (as `Need::Docker` has
/// the engine started by the test command).
fn containerd_runs() -> Result<(), String> {
    containerd::ensure_daemon()
        .map_err(|e| format!("needs containerd on {}: {e:#}", containerd::ADDRESS))
}

fn main() {
    // Leftovers of runs that were killed before their guards dropped.
    if containerd::answers() {
        if let Err(e) = containerd::sweep_dead_owners(&["moby", "k8s.io"]) {
            eprintln!("sweeping containerd leftovers: {e:#}");
        }
    }
    if std::path::Path::new(podman::PODMAN).exists() {
        if let Err(e) = podman::sweep_dead_owners() {
            eprintln!("sweeping Podman leftovers: {e:#}");
        }
    }
    let ctr = e2e::live(&[Need::Go, Need::Program("ctr"), Need::Check(containerd_runs)]);
    let pm = e2e::live(&[Need::Go, Need::Program(podman::PODMAN)]);
    let both = e2e::live(&[
        Need::Go,
        Need::Program("ctr"),
        Need::Check(containerd_runs),
        Need::Program(podman::PODMAN),
        Need::Program("setpriv"),
        Need::Program("unshare"),
    ]);
    e2e::run(vec![
        e2e::trial(
            "containerd_moby_container_traced_by_name",
            &ctr,
            containerd_container_traced_by_name("moby"),
        ),
        e2e::trial(
            "containerd_k8s_container_traced_by_name",
            &ctr,
            containerd_container_traced_by_name("k8s.io"),
        ),
        e2e::trial(
            "podman_container_traced_by_name",
            &pm,
            podman_container_traced_by_name,
        ),
        e2e::trial("pod_traced_whole", &ctr, pod_traced_whole),
        e2e::trial(
            "pod_counted_by_selector_and_name",
            &ctr,
            pod_counted_by_selector_and_name,
        ),
        e2e::trial("pod_timed_per_container", &ctr, pod_timed_per_container),
        e2e::trial(
            "selection_matching_nothing_is_one_line",
            &e2e::live(&[]),
            selection_matching_nothing_is_one_line,
        ),
        e2e::trial(
            "runtime_refused_or_absent_is_a_note",
            &both,
            runtime_refused_or_absent_is_a_note,
        ),
    ]);
}
