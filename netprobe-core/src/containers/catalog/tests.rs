//! The catalog's lookups on made-up runtime answers: placement by cgroup, choice by name, id,
//! pod and selector, and the errors that name the fix.

use super::*;
use std::collections::BTreeMap;

const DOCKER_ID: &str = "3f4e1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
const POD_ID_A: &str = "aaaa1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
const POD_ID_B: &str = "bbbb1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";

fn meta(
    id: &str,
    runtime: &'static str,
    ns: Option<&str>,
    name: Option<&str>,
    labels: &[(&str, &str)],
    pid: Option<u32>,
) -> Metadata {
    Metadata {
        id: id.into(),
        runtime,
        namespace: ns.map(str::to_string),
        name: name.map(str::to_string),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        init_pid: pid,
    }
}

fn pod_labels(container: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("io.kubernetes.pod.name", "checkout-7d4"),
        ("io.kubernetes.pod.namespace", "shop"),
        ("io.kubernetes.container.name", container),
        ("app", "checkout"),
    ]
}

/// Docker's container `web`, whose first process is `pid`.
fn docker_web(pid: Option<u32>) -> Metadata {
    meta(DOCKER_ID, "docker", None, Some("web"), &[], pid)
}

fn catalog() -> Catalog {
    Catalog::new(
        vec![
            Ok(vec![docker_web(Some(10))]),
            Ok(vec![
                // Docker's container again, as containerd's moby namespace keeps it.
                meta(DOCKER_ID, "containerd", Some("moby"), None, &[], Some(10)),
                meta("web", "containerd", Some("k8s.io"), None, &[], Some(20)),
                meta(
                    POD_ID_A,
                    "containerd",
                    Some("k8s.io"),
                    None,
                    &pod_labels("api"),
                    Some(30),
                ),
                meta(
                    POD_ID_B,
                    "containerd",
                    Some("k8s.io"),
                    None,
                    &pod_labels("sidecar"),
                    Some(40),
                ),
                meta("stopped", "containerd", Some("default"), None, &[], None),
                // The pod's sandbox: the pod's labels, no container name.
                meta(
                    &"dd".repeat(32),
                    "containerd",
                    Some("k8s.io"),
                    None,
                    &[
                        ("io.kubernetes.pod.name", "checkout-7d4"),
                        ("io.kubernetes.pod.namespace", "shop"),
                        ("io.cri-containerd.kind", "sandbox"),
                        ("app", "checkout"),
                    ],
                    Some(60),
                ),
            ]),
            Ok(vec![meta(
                "cc".repeat(32).as_str(),
                "podman",
                None,
                Some("db"),
                &[("app", "db")],
                Some(50),
            )]),
            Err(RuntimeError::Refused {
                runtime: "podman",
                path: "/x".into(),
                why: "EACCES".into(),
            }),
            Err(RuntimeError::Absent {
                runtime: "podman",
                path: "/y".into(),
            }),
        ],
        // Podman's first process sits in a cgroup without the id in its name.
        |pid| (pid == 50).then(|| "/machine.slice/app-db.scope".to_string()),
    )
}

fn name_of(c: &Catalog, cgroup: &str) -> Option<String> {
    c.container_of_cgroup(cgroup)
        .map(|k| format!("{} {}", k.engine, k.name.unwrap_or_default()))
}

#[test]
fn processes_are_placed_by_cgroup() {
    let c = catalog();
    assert_eq!(
        name_of(&c, &format!("0::/system.slice/docker-{DOCKER_ID}.scope\n")).as_deref(),
        Some("docker web")
    );
    assert_eq!(
        name_of(&c, "0::/k8s.io/web\n").as_deref(),
        Some("containerd web")
    );
    assert_eq!(
        name_of(&c, "0::/machine.slice/app-db.scope/worker\n").as_deref(),
        Some("podman db")
    );
    assert_eq!(
        name_of(&c, &format!("0::/kubepods/besteffort/pod1/{POD_ID_A}\n")).as_deref(),
        Some("containerd api")
    );
    assert_eq!(name_of(&c, "0::/user.slice/session-1.scope\n"), None);
    assert_eq!(
        name_of(&c, "0::/default/other\n"),
        None,
        "an unknown NAMESPACE/ID is the host's"
    );
    let pod = c
        .container_of_cgroup(&format!("0::/k8s.io/{POD_ID_B}\n"))
        .unwrap()
        .pod
        .unwrap();
    assert_eq!(
        (
            pod.namespace.as_str(),
            pod.name.as_str(),
            pod.container.as_deref()
        ),
        ("shop", "checkout-7d4", Some("sidecar"))
    );
    assert_eq!(c.notes().len(), 1, "{:?}", c.notes());
    assert!(
        c.notes()[0].contains("podman: cannot read /x"),
        "{:?}",
        c.notes()
    );
}

#[test]
fn containers_by_name_id_prefix_and_namespace() {
    let c = catalog();
    let pick = |s: &str| {
        c.select(&Selection::Container(s.into()))
            .map(|v| c.label(v[0]))
    };
    assert_eq!(pick("web").unwrap_err().to_string(), "--container web: 2 containers answer to it (docker 3f4e1b2c9d8a, containerd k8s.io/web): give the full id or NAMESPACE/ID");
    assert_eq!(pick("k8s.io/web").unwrap(), "containerd k8s.io/web");
    assert_eq!(pick("3f4e").unwrap(), "docker 3f4e1b2c9d8a");
    assert_eq!(pick("db").unwrap(), "podman cccccccccccc");
    assert_eq!(pick("api").unwrap(), "containerd k8s.io/aaaa1b2c9d8a");
    let e = pick("nothere").unwrap_err().to_string();
    assert_eq!(e, "--container nothere: no container has that name or id (looked in docker, containerd moby, containerd k8s.io, containerd default, podman): list them with `netprobe ps`");
}

#[test]
fn pods_and_selectors_choose_every_container() {
    let c = catalog();
    let labels = |sel: Selection| {
        c.select(&sel)
            .map(|v| v.iter().map(|&i| c.label(i)).collect::<Vec<_>>())
    };
    let both = vec![
        "containerd k8s.io/aaaa1b2c9d8a".to_string(),
        "containerd k8s.io/bbbb1b2c9d8a".to_string(),
    ];
    assert_eq!(
        labels(Selection::Pod(PodRef::parse("shop/checkout-7d4").unwrap())).unwrap(),
        both
    );
    assert_eq!(
        labels(Selection::Pod(PodRef::parse("checkout-7d4").unwrap())).unwrap(),
        both
    );
    assert_eq!(
        labels(Selection::Labels(
            LabelSelector::parse("app=checkout").unwrap()
        ))
        .unwrap(),
        both
    );
    assert!(matches!(
        c.select(&Selection::Pod(
            PodRef::parse("other/checkout-7d4").unwrap()
        )),
        Err(SelectError::NoSuchPod { .. })
    ));
    assert!(matches!(
        c.select(&Selection::Labels(
            LabelSelector::parse("app=none").unwrap()
        )),
        Err(SelectError::NoMatch { .. })
    ));
}

#[test]
fn runtimes_without_state_are_named_in_errors() {
    let absent = |runtime| {
        Err(RuntimeError::Absent {
            runtime,
            path: "/x".into(),
        })
    };
    let c = Catalog::new(
        vec![
            Ok(vec![docker_web(None)]),
            absent("containerd"),
            absent("podman"),
        ],
        |_| None,
    );
    let e = c.select(&Selection::Container("db".into())).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--container db: no container has that name or id (looked in docker; no state of containerd, podman here): list them with `netprobe ps`"
    );
    assert!(
        c.notes().is_empty(),
        "an absent runtime is no note: {:?}",
        c.notes()
    );
}

#[test]
fn a_stopped_container_is_named_as_not_running() {
    let c = catalog();
    let e = c
        .select_processes(
            Path::new("/nonexistent"),
            &Selection::Container("stopped".into()),
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "--container stopped: container stopped (containerd default) is not running: start it, or choose a running container (`netprobe ps`)");
    let e = c
        .select_processes(
            Path::new("/nonexistent"),
            &Selection::Container("db".into()),
        )
        .unwrap_err();
    assert!(matches!(e, SelectError::NoVisibleProcess { .. }), "{e}");
}

proptest::proptest! {
    #[test]
    fn hostile_cgroup_text_never_panics(text in "\\PC{0,200}") {
        let _ = catalog().container_of_cgroup(&text);
    }
}
