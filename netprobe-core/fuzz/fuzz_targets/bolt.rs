//! BoltDB files (bbolt's on-disk format: github.com/etcd-io/bbolt, internal/common/page.go,
//! meta.go, bucket.go) and the containerd and Podman state read from them: every bucket walked
//! (a bounded number of entries), every key looked up again, and both runtimes' readers run.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_core::containers::bolt::{Db, Value};
use netprobe_core::containers::{containerd, podman};

fuzz_target!(|data: &[u8]| {
    let Ok(db) = Db::open(data) else {
        return;
    };
    let mut pending = vec![db.root()];
    let mut budget = 20_000usize;
    while let Some(bucket) = pending.pop() {
        for entry in bucket.entries() {
            let Ok(entry) = entry else { break };
            budget = budget.saturating_sub(1);
            if budget == 0 {
                return;
            }
            let _ = bucket.get(entry.key);
            if let Value::Bucket(inner) = entry.value {
                pending.push(inner);
            }
        }
    }
    let _ = containerd::containers_in_db(&db);
    let _ = podman::containers_in_db(&db);
});
