//! The CPU pool: rayon's global threads, one per core, where renders and compressions run
//! ([`super::bodies`]), at a lower scheduling priority than the async workers.
//!
//! On a machine with as many busy render threads as cores, the kernel shares each core
//! between a render and whichever async worker wakes up to answer a request; a probe of
//! `/healthz` then waits for its worker's share. At nice [`NICENESS`] a render thread weighs
//! a tenth of a worker (CFS weights 110 against 1024), so a woken worker runs at once and
//! renders take what the workers leave, which under load is nearly all of it.

/// How much lower the render threads' priority is than the process's.
pub const NICENESS: i32 = 10;

/// Builds rayon's global pool with threads that lower their own priority when they start.
/// Once per process: a pool already built (a second server in one test process, or work
/// that ran before) is left as it is, with a warning when it is the first call.
pub fn configure() {
    static CONFIGURED: std::sync::Once = std::sync::Once::new();
    CONFIGURED.call_once(|| {
        let built = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("sessiongraph-cpu-{i}"))
            .start_handler(|_| lower_this_threads_priority())
            .build_global();
        if let Err(e) = built {
            tracing::warn!(error = %e, "the CPU pool was built before: its threads keep their priority");
        }
    });
}

/// Raises the calling thread's nice value by [`NICENESS`] (Linux keeps one per thread, and
/// a thread it starts inherits it); a refusal is logged and the thread keeps its priority.
/// Elsewhere the nice value is the process's: the threads are left as they are. For
/// background work (renders, the search indexer) that must leave the cores to requests.
#[cfg(target_os = "linux")]
pub fn lower_this_threads_priority() {
    let tid = rustix::thread::gettid();
    let result = rustix::process::getpriority_process(Some(tid))
        .and_then(|now| rustix::process::setpriority_process(Some(tid), now + NICENESS));
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not lower a background thread's priority");
    }
}

/// Elsewhere: nothing (see the Linux version).
#[cfg(not(target_os = "linux"))]
pub fn lower_this_threads_priority() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn render_threads_run_below_the_callers_priority() {
        let before = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .start_handler(|_| lower_this_threads_priority())
            .build()
            .unwrap();
        let inside =
            pool.install(|| rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap());
        assert_eq!(inside, (before + NICENESS).min(19));
        let after = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        assert_eq!(after, before, "the caller's own priority is untouched");
    }
}
