//! The metrics as a whole: the exposition of known calls (a snapshot), the series cap, a rebound
//! plan, lost events, the decorator over the latency sink, and the histogram's buckets against
//! the latency sink's.

use super::series::{FIRST_BUCKET, LAST_BUCKET};
use super::*;
use crate::backend::Lost;
use crate::plan::Role;
use crate::plan::{FunctionId, Hit, ProbePlan};
use crate::sinks::latency::{bucket_bounds, bucket_of};
use crate::sinks::{Latency, Sink, TaskInfo};
use proptest::prelude::*;

fn plan(names: &[&str]) -> ProbePlan {
    crate::sinks::test_plan(names, "/srv/app")
}

fn task<'a>(pid: Option<u32>, comm: &'a str, container: &'a str) -> Task<'a> {
    Task {
        pid,
        comm,
        container,
        pod: "",
    }
}

fn hit(function: u32, role: Role, ts_ns: u64, tid: u32) -> Hit {
    Hit {
        ts_ns,
        tid,
        pid: None,
        probe: 0,
        function: FunctionId(function),
        role,
        args: vec![],
        pair_key: u64::from(tid),
        comm: None,
        user_stack: None,
    }
}

/// The exposition of a fixed set of calls: two functions, two processes, durations in
/// several buckets (one past the last bound, in `+Inf`), a label value that needs escaping.
#[test]
fn exposition_of_known_calls() {
    let m = Metrics::new(&plan(&["main.handle", "np_add"]), 3, DEFAULT_MAX_SERIES);
    for _ in 0..3 {
        m.call(FunctionId(0), &task(Some(4242), "server", ""));
    }
    m.call(FunctionId(0), &task(Some(4343), "wor\"ker", "web"));
    m.call(FunctionId(1), &task(None, "", ""));
    for ns in [1_500, 1_023, 1_024, 200, 70_000_000_000] {
        m.duration(FunctionId(0), &task(Some(4242), "server", ""), ns);
    }
    m.set_lost(Lost {
        counted: 7,
        unknown_amount: false,
    });
    let text = Metrics::exposition(&m.registry());
    insta::assert_snapshot!(text);
}

/// Two containers of one pod, same container name in another pod: a series each, with the pod
/// and namespace labels Kubernetes tools use.
#[test]
fn pods_label_their_series() {
    let m = Metrics::new(&plan(&["f"]), 1, DEFAULT_MAX_SERIES);
    let in_pod = |pid, container, pod| Task {
        pid: Some(pid),
        comm: "srv",
        container,
        pod,
    };
    m.call(FunctionId(0), &in_pod(1, "api", "shop/checkout-7d4"));
    m.call(FunctionId(0), &in_pod(2, "sidecar", "shop/checkout-7d4"));
    m.call(FunctionId(0), &in_pod(3, "api", "shop/cart-1"));
    let text = Metrics::exposition(&m.registry());
    for (pid, container, pod) in [
        (1, "api", "checkout-7d4"),
        (2, "sidecar", "checkout-7d4"),
        (3, "api", "cart-1"),
    ] {
        let want = format!("netprobe_calls_total{{function=\"f\",image=\"/srv/app\",pid=\"{pid}\",comm=\"srv\",container=\"{container}\",pod=\"{pod}\",namespace=\"shop\"}} 1");
        assert!(text.contains(&want), "{want}\n{text}");
    }
}

#[test]
fn the_series_cap_holds_and_drops_are_counted() {
    // Room for 3 call series, or one histogram (HISTOGRAM_SERIES) and change.
    let m = Metrics::new(&plan(&["f"]), 1, 3);
    for pid in 0..10 {
        m.call(FunctionId(0), &task(Some(pid), "x", ""));
        m.call(FunctionId(0), &task(Some(pid), "x", ""));
    }
    m.duration(FunctionId(0), &task(Some(1), "x", ""), 10);
    let text = Metrics::exposition(&m.registry());
    assert_eq!(text.matches("netprobe_calls_total{").count(), 3, "{text}");
    // Known series keep counting; 7 new pids twice each, and the histogram, were dropped.
    assert!(
        text.contains("pid=\"0\",comm=\"x\",container=\"\"} 2"),
        "{text}"
    );
    assert!(text.contains("netprobe_dropped_series_total 15"), "{text}");
    assert!(
        !text.contains("netprobe_call_duration_seconds_count{"),
        "{text}"
    );
}

/// A restarted target's plan (another process, its image seen through another
/// `/proc/PID/root`, functions in another order) continues the same series: counters keep
/// their function and image labels and grow; lost events add up over sessions.
#[test]
fn a_rebound_plan_continues_the_series() {
    let first = crate::sinks::test_plan(&["main.handle", "main.other"], "/proc/100/root/app/srv");
    let m = Metrics::new(&first, 2, 100);
    m.call(FunctionId(0), &task(Some(100), "srv", "web"));
    m.call(FunctionId(1), &task(Some(100), "srv", "web"));
    m.set_lost(Lost {
        counted: 2,
        unknown_amount: false,
    });
    m.detached();
    assert!(Metrics::exposition(&m.registry()).contains("netprobe_probes_attached 0"));
    let second = crate::sinks::test_plan(
        &["main.other", "main.handle", "main.new"],
        "/proc/200/root/app/srv",
    );
    m.rebind(&second, 3);
    m.call(FunctionId(0), &task(Some(200), "srv", "web"));
    m.call(FunctionId(0), &task(Some(200), "srv", "web"));
    m.call(FunctionId(2), &task(Some(200), "srv", "web"));
    m.set_lost(Lost {
        counted: 1,
        unknown_amount: false,
    });
    let text = Metrics::exposition(&m.registry());
    let series = |f: &str, pid: u32| {
        format!("netprobe_calls_total{{function=\"{f}\",image=\"/app/srv\",pid=\"{pid}\",comm=\"srv\",container=\"web\"}}")
    };
    assert!(
        text.contains(&format!("{} 1", series("main.handle", 100))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} 1", series("main.other", 100))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} 2", series("main.other", 200))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} 1", series("main.new", 200))),
        "{text}"
    );
    assert!(
        !text.contains("pid=\"200\",comm=\"srv\",container=\"web\"} 0"),
        "{text}"
    );
    assert!(text.contains("netprobe_lost_events_total 3"), "{text}");
    assert!(text.contains("netprobe_probes_attached 3"), "{text}");
}

#[test]
fn image_labels_leave_out_the_proc_root() {
    let l = |p: &str| image_label(std::path::Path::new(p));
    assert_eq!(l("/proc/4242/root/app/sampleapp"), "/app/sampleapp");
    assert_eq!(l("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6");
    assert_eq!(l("/proc/self/root/x"), "/proc/self/root/x");
    assert_eq!(l("/proc//root/x"), "/proc//root/x");
}

#[test]
fn lost_events_never_go_down() {
    let m = Metrics::new(&plan(&["f"]), 1, 10);
    for counted in [5, 3, 9] {
        m.set_lost(Lost {
            counted,
            unknown_amount: false,
        });
    }
    assert!(Metrics::exposition(&m.registry()).contains("netprobe_lost_events_total 9"));
}

/// Through the decorator on our own process: pid and comm come from /proc, calls are counted
/// as `count` counts them, and latency's pairs become the histogram.
#[test]
fn the_decorator_exports_what_the_sinks_see() {
    let p = plan(&["f"]);
    let me = std::process::id();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let m = Metrics::new(&p, 2, 100);
    let mut lat = Latency::default();
    {
        let mut s = Exported::timing(&mut lat, m.clone(), TaskInfo::new(None));
        for i in 0..4u64 {
            s.hit(&p, hit(0, Role::Entry, 1_000 + i * 10_000, me));
            s.hit(&p, hit(0, Role::Return, 1_000 + i * 10_000 + 3_000, me));
        }
    }
    assert_eq!(lat.total, 4);
    let text = Metrics::exposition(&m.registry());
    let place = crate::sinks::places::Places::default().of(me);
    let labels = format!(
        "{{function=\"f\",image=\"/srv/app\",pid=\"{me}\",comm=\"{}\",container=\"{}\"{}}}",
        comm.trim_end(),
        place.as_ref().map_or("", |p| p.container.as_str()),
        match place
            .as_ref()
            .and_then(|p| Some((p.pod.as_ref()?, p.namespace.as_ref()?)))
        {
            Some((pod, ns)) => format!(",pod=\"{pod}\",namespace=\"{ns}\""),
            None => String::new(),
        }
    );
    assert!(
        text.contains(&format!("netprobe_calls_total{labels} 4")),
        "{text}"
    );
    assert!(
        text.contains(&format!("netprobe_call_duration_seconds_count{labels} 4")),
        "{text}"
    );
    assert!(text.contains("netprobe_probes_attached 2"), "{text}");
}

/// The cumulative count the exposition shows at bound `le` (seconds; parsed back, so the
/// text round-trips to the same number).
fn cumulative(text: &str, le: f64) -> u64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.split_once("_bucket{le=\"")?.1;
            let (bound, _) = rest.split_once('"')?;
            let bound: f64 = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound.parse().ok()?
            };
            (bound == le).then(|| l.rsplit(' ').next()?.parse().ok())?
        })
        .next()
        .unwrap_or_else(|| panic!("no bucket le={le} in {text}"))
}

proptest! {
    /// An image label never names `/proc/PID/root`, and labelling twice changes nothing.
    #[test]
    fn image_labels_are_stable(pid in 1u32..99_999, inside in "(/[a-z._-]{1,8}){1,4}") {
        let label = image_label(std::path::Path::new(&format!("/proc/{pid}/root{inside}")));
        prop_assert_eq!(&label, &inside);
        prop_assert_eq!(image_label(std::path::Path::new(&label)), label);
    }

    /// Each exported bucket holds exactly the calls of the latency sink's log2 buckets up to
    /// its own: the cumulative count at `le` = (2^(b+1) - 1) ns equals the durations whose
    /// bucket is at most b, and `+Inf`, `_count` and `_sum` cover every call.
    #[test]
    fn buckets_match_the_latency_sink(durations in proptest::collection::vec(
        prop_oneof![0u64..5_000, 0u64..200_000_000_000, Just(1023), Just(1024), Just((1 << 36) - 1)],
        1..40,
    )) {
        let m = Metrics::new(&plan(&["f"]), 1, 1000);
        for &d in &durations {
            m.duration(FunctionId(0), &task(Some(1), "c", ""), d);
        }
        let text = Metrics::exposition(&m.registry());
        for b in FIRST_BUCKET..=LAST_BUCKET {
            let le = bucket_bounds(b).1 as f64 / 1e9;
            let want = durations.iter().filter(|&&d| bucket_of(d) <= b).count() as u64;
            prop_assert_eq!(cumulative(&text, le), want, "le {}", le);
        }
        prop_assert_eq!(cumulative(&text, f64::INFINITY), durations.len() as u64);
        let sum: u128 = durations.iter().map(|&d| u128::from(d)).sum();
        let shown: f64 = text.lines()
            .find(|l| l.starts_with("netprobe_call_duration_seconds_sum"))
            .and_then(|l| l.rsplit(' ').next()).unwrap().parse().unwrap();
        prop_assert!((shown - sum as f64 / 1e9).abs() <= 1e-9 * (sum as f64 / 1e9).max(1.0));
    }
}
