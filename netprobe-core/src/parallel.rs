//! Work spread over this thread and one more, for listings large enough to gain from it (a large
//! ReadyToRun assembly's methods). A thread on this 2-CPU VM often starts only when the one that
//! made it waits: work of a few milliseconds gains nothing (resolving one name in dockerd as two
//! passes, the Go table's and the ELF symbols', ran at 1.0 CPUs utilized and 1 ms slower).

use std::sync::atomic::{AtomicUsize, Ordering};

/// `[job(0), job(1), ..., job(n - 1)]`, computed on this thread and, when `parallel`, on one
/// more: each takes the next job nobody took yet, so a thread that starts late takes fewer
/// (on this 2-CPU VM a new thread is often queued behind the one that made it, 1-3 ms, and
/// runs only when that one waits: a fixed half each then took as long as one thread).
/// All run here without `parallel` or when the thread cannot be started. A panic in a job
/// is resumed here.
pub(crate) fn jobs_in_order<T: Send>(
    n: usize,
    parallel: bool,
    job: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let take = |done: &mut Vec<(usize, T)>| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        done.push((i, job(i)));
    };
    let mut mine = Vec::new();
    let theirs = if parallel && n > 1 {
        std::thread::scope(|s| {
            let worker = std::thread::Builder::new().spawn_scoped(s, || {
                let mut theirs = Vec::new();
                take(&mut theirs);
                theirs
            });
            take(&mut mine);
            match worker {
                Ok(w) => w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // Not started: every job was taken here.
                Err(_) => Vec::new(),
            }
        })
    } else {
        take(&mut mine);
        Vec::new()
    };
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    for (i, t) in mine.into_iter().chain(theirs) {
        slots[i] = Some(t);
    }
    // Each index below `n` was taken exactly once (`fetch_add`).
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every job runs exactly once and its result is at its index, on one thread or two,
        /// however long the jobs take (some sleep, so that either thread may take any job).
        #[test]
        fn jobs_in_order_runs_each_job_once_in_place(
            n in 0usize..80,
            parallel in any::<bool>(),
            slow in proptest::collection::vec(any::<bool>(), 80),
        ) {
            let runs: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            let got = jobs_in_order(n, parallel, |i| {
                runs[i].fetch_add(1, Ordering::Relaxed);
                if slow[i] {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                i * 7 + 1
            });
            prop_assert_eq!(got, (0..n).map(|i| i * 7 + 1).collect::<Vec<_>>());
            prop_assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
        }
    }

    /// A job that panics on the second thread panics the caller (not a missing result).
    #[test]
    fn jobs_in_order_resumes_a_panic() {
        let caught = std::panic::catch_unwind(|| {
            jobs_in_order(64, true, |i| {
                std::thread::sleep(std::time::Duration::from_micros(20));
                assert!(i != 40, "job 40");
                i
            })
        });
        assert!(caught.is_err());
    }
}
