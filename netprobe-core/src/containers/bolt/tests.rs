//! The reader on files built here page by page (every structure, and each lie a hostile file can
//! tell) and on files real containerd 1.6.20 and Podman 4.3.1 wrote
//! (`fixtures/recorded/containers/`).

use super::meta::tests::meta_page;
use super::page::tests::{branch, leaf};
use super::page::BUCKET_LEAF;
use super::*;
use proptest::prelude::*;

const PAGE: usize = 1024;

/// A bucket value: the `InBucket` header (root, sequence), then the inline page if root is 0.
fn bucket_value(root: u64, inline: &[u8]) -> Vec<u8> {
    let mut v = root.to_le_bytes().to_vec();
    v.extend(0u64.to_le_bytes());
    v.extend_from_slice(inline);
    v
}

/// A file with every structure: meta pages 0 and 1 (1 newer), a root leaf (page 2) holding a
/// bucket on pages of its own (`big`: a branch page 3 over leaves 4 and 5, leaf 5 with an
/// overflow page 6 for a 1,500-byte value), an inline bucket (`small`, itself holding an inline
/// bucket `inner`), and a plain value.
pub(super) fn synthetic() -> Vec<u8> {
    let inner = leaf(0, 0, &[(0, b"deep", b"yes")]);
    let small = leaf(
        0,
        0,
        &[
            (0, b"x", b"1"),
            (BUCKET_LEAF, b"inner", &bucket_value(0, &inner)),
        ],
    );
    let root = leaf(
        2,
        PAGE,
        &[
            (BUCKET_LEAF, b"big", &bucket_value(3, &[])),
            (0, b"plain", b"value"),
            (BUCKET_LEAF, b"small", &bucket_value(0, &small)),
        ],
    );
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let left: Vec<(u32, &[u8], &[u8])> = keys[..5]
        .iter()
        .map(|k| (0, k.as_bytes(), &b"v"[..]))
        .collect();
    let big_value = vec![b'z'; 1500];
    let mut right: Vec<(u32, &[u8], &[u8])> = keys[5..]
        .iter()
        .map(|k| (0, k.as_bytes(), &b"v"[..]))
        .collect();
    right[4].2 = &big_value;
    let mut overflowing = leaf(5, 2 * PAGE, &right);
    overflowing[12..16].copy_from_slice(&1u32.to_le_bytes());
    let mut file = meta_page(0, PAGE as u32, 2, 7, 4);
    file.extend(meta_page(1, PAGE as u32, 2, 7, 5));
    file.extend(root);
    file.extend(branch(3, PAGE, &[(b"k0", 4), (b"k5", 5)]));
    file.extend(leaf(4, PAGE, &left));
    file.extend(overflowing);
    file
}

fn keys(b: &Bucket) -> Vec<String> {
    b.entries()
        .map(|e| String::from_utf8_lossy(e.unwrap().key).into_owned())
        .collect()
}

/// Walks every bucket of `db` (depth first, at most `budget` entries), counting entries; the
/// first error ends the walk. What the fuzz target and the proptest run on arbitrary bytes.
fn walk(b: Bucket, budget: &mut usize) -> Result<usize, BoltError> {
    let mut n = 0;
    for e in b.entries() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        n += 1;
        if let Value::Bucket(inner) = e?.value {
            n += walk(inner, budget)?;
        }
    }
    Ok(n)
}

#[test]
fn every_structure_of_the_synthetic_file() {
    let file = synthetic();
    let db = Db::open(&file).unwrap();
    assert_eq!(db.txid(), 5);
    assert_eq!(keys(&db.root()), ["big", "plain", "small"]);
    let big = db.bucket(&[b"big"]).unwrap().unwrap();
    assert_eq!(
        keys(&big),
        (0..10).map(|i| format!("k{i}")).collect::<Vec<_>>()
    );
    assert_eq!(big.value(b"k9").unwrap().map(<[u8]>::len), Some(1500));
    assert_eq!(big.value(b"k3").unwrap(), Some(&b"v"[..]));
    assert_eq!(big.value(b"k45").unwrap(), None);
    assert_eq!(big.value(b"a").unwrap(), None);
    let inner = db.bucket(&[b"small", b"inner"]).unwrap().unwrap();
    assert_eq!(inner.value(b"deep").unwrap(), Some(&b"yes"[..]));
    assert_eq!(db.root().value(b"plain").unwrap(), Some(&b"value"[..]));
    assert!(
        db.bucket(&[b"plain"]).unwrap().is_none(),
        "a value is no bucket"
    );
    assert!(db.bucket(&[b"nothing", b"x"]).unwrap().is_none());
    assert_eq!(
        walk(db.root(), &mut usize::MAX.clone()).unwrap(),
        3 + 10 + 2 + 1
    );
}

#[test]
fn a_cycle_and_a_foreign_page_are_errors() {
    let mut file = synthetic();
    // The branch's second child points back at the branch itself.
    let child = 3 * PAGE + 16 + 16 + 8;
    file[child..child + 8].copy_from_slice(&3u64.to_le_bytes());
    let db = Db::open(&file).unwrap();
    let big = db.bucket(&[b"big"]).unwrap().unwrap();
    let last = big.entries().last().unwrap();
    assert_eq!(last.unwrap_err(), BoltError::Cycle { id: 3 });
    // A child past the high-water mark.
    file[child..child + 8].copy_from_slice(&9u64.to_le_bytes());
    let db = Db::open(&file).unwrap();
    let big = db.bucket(&[b"big"]).unwrap().unwrap();
    assert!(big.entries().any(|e| e.is_err()));
    assert!(big.value(b"k7").is_err());
}

#[test]
fn buckets_nested_past_the_depth_limit_are_an_error() {
    let mut page = leaf(0, 0, &[(0, b"end", b"")]);
    for _ in 0..=MAX_DEPTH {
        page = leaf(0, 0, &[(BUCKET_LEAF, b"n", &bucket_value(0, &page))]);
    }
    // 66 nested inline pages of ~50 bytes each: one 4 KiB page holds them all.
    let mut file = meta_page(0, 4096, 2, 3, 1);
    file.extend(meta_page(1, 4096, 2, 3, 0));
    file.extend(leaf(
        2,
        4096,
        &[(BUCKET_LEAF, b"top", &bucket_value(0, &page))],
    ));
    let db = Db::open(&file).unwrap();
    assert_eq!(walk(db.root(), &mut 1_000_000), Err(BoltError::TooDeep));
}

/// The fixture `name` of `fixtures/recorded/containers/`, gunzipped.
pub(crate) fn recorded(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/recorded/containers")
        .join(name);
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out).unwrap();
    out
}

/// The bucket tree of a real file, two levels of keys under each path, as text.
fn outline(db: &Db, path: &[&[u8]]) -> String {
    let b = db.bucket(path).unwrap().unwrap();
    let mut out = String::new();
    for e in b.entries() {
        let e = e.unwrap();
        let key = String::from_utf8_lossy(e.key);
        match e.value {
            Value::Data(v) => out += &format!("{key} = {} bytes\n", v.len()),
            Value::Bucket(inner) => out += &format!("{key}/ {:?}\n", keys(&inner)),
        }
    }
    out
}

#[test]
fn containerd_metadata_written_by_containerd() {
    let file = recorded("containerd-1.6.20-meta.db.gz");
    let db = Db::open(&file).unwrap();
    insta::assert_snapshot!(outline(&db, &[b"v1"]), @r###"
    default/ ["containers", "leases"]
    k8s.io/ ["containers", "leases"]
    moby/ ["containers", "leases"]
    version = 1 bytes
    "###);
    // containerd `core/metadata/buckets.go`'s container schema.
    insta::assert_snapshot!(outline(&db, &[b"v1", b"k8s.io", b"containers", b"web-api"]), @r###"
    createdat = 15 bytes
    image = 0 bytes
    labels/ ["app", "io.kubernetes.container.name", "io.kubernetes.pod.name", "io.kubernetes.pod.namespace"]
    runtime/ ["name", "options"]
    snapshotKey = 0 bytes
    snapshotter = 0 bytes
    spec = 2926 bytes
    updatedat = 15 bytes
    "###);
}

#[test]
fn containerd_metadata_with_two_hundred_containers_spans_branch_pages() {
    // 200 entries of 36 bytes (element, 4-byte key, bucket header) fill more than one 4 KiB
    // leaf, so the `containers` bucket is a branch page over leaves.
    let file = recorded("containerd-1.6.20-meta-many.db.gz");
    let db = Db::open(&file).unwrap();
    let many = db
        .bucket(&[b"v1", b"many", b"containers"])
        .unwrap()
        .unwrap();
    let ids = keys(&many);
    assert_eq!(ids.len(), 200);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in key order");
    let c150 = many.bucket(b"c150").unwrap().unwrap();
    let labels = c150.bucket(b"labels").unwrap().unwrap();
    assert_eq!(labels.value(b"idx").unwrap(), Some(&b"150"[..]));
}

#[test]
fn podman_state_written_by_podman() {
    let file = recorded("podman-4.3.1-bolt_state.db.gz");
    let db = Db::open(&file).unwrap();
    // libpod `boltdb_state_internal.go`'s bucket names.
    insta::assert_snapshot!(keys(&db.root()).join("\n"), @r###"
    all-ctrs
    allPods
    allVolumes
    ctr
    exec
    exit-code
    exit-code-time-stamp
    id-registry
    name-registry
    ns-registry
    pod
    runtime-config
    vol
    volume-ctrs
    "###);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes: an error or a walk, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..8192)) {
        if let Ok(db) = Db::open(&bytes) {
            let _ = walk(db.root(), &mut 10_000);
        }
    }

    /// The synthetic file with bytes overwritten anywhere past the meta pages (which keep it a
    /// BoltDB file, so the walk reaches the broken pages): an error or a walk, never a panic.
    #[test]
    fn mutated_files_never_panic(edits in proptest::collection::vec((2 * PAGE..7 * PAGE, any::<u8>()), 1..16)) {
        let mut file = synthetic();
        for (at, b) in edits {
            file[at] = b;
        }
        let db = Db::open(&file).unwrap();
        let _ = walk(db.root(), &mut 10_000);
        for path in [&[&b"big"[..]][..], &[b"small", b"inner"]] {
            if let Ok(Some(b)) = db.bucket(path) {
                let _ = b.get(b"k9");
            }
        }
    }
}

/// The fuzz target's seed (`netprobe-core/fuzz/seeds/bolt/synthetic.db`) is [`synthetic`]'s file
/// (`NETPROBE_WRITE_BOLT_SEED=1` writes it anew after a change to [`synthetic`]).
#[test]
fn the_fuzz_seed_is_the_synthetic_file() {
    let seed =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/bolt/synthetic.db");
    if std::env::var_os("NETPROBE_WRITE_BOLT_SEED").is_some() {
        std::fs::write(&seed, synthetic()).unwrap();
    }
    assert!(
        std::fs::read(&seed).unwrap() == synthetic(),
        "{} differs from synthetic()",
        seed.display()
    );
}
