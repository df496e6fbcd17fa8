//! Criterion bench of process-table sampling (SPEC R5.5, R9.4): one full
//! sample of a real process tree's descendants through stallwarden's
//! `/proc` reader (following the kernel's children lists, and walking the
//! table as a kernel without them makes it), against `sysinfo`'s refresh of every process (what a user
//! must do to find descendants with it). The side-by-side table with `ps`
//! is `cargo bench --bench compare`.
//!
//! The `net` group measures what R5.11's `net` signal adds to a sample, on
//! 100 processes holding TCP sockets.
//!
//! Run: `cargo bench -p stallwarden --bench sampling` (`-- net` for the
//! `net` group alone).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stallwarden::sources::procs;

#[path = "support/mod.rs"]
mod support;
use support::{SocketTree, Tree};

fn sampling(c: &mut Criterion) {
    let tree = Tree::spawn();
    let root = tree.pid();
    let mut g = c.benchmark_group("sampling");
    g.sample_size(30);
    g.bench_function("stallwarden_sample_once", |b| {
        b.iter(|| black_box(procs::sample_once(root).expect("sample")))
    });
    let mut table = procs::ProcTable::new();
    g.bench_function("stallwarden_proc_table_reused", |b| {
        b.iter(|| black_box(table.sample(root).expect("sample")))
    });
    // R8.13: the same sample without the blocking points (what a sample
    // cost before them), and the verdict's look, which asks every process.
    let mut bare = procs::ProcTable::new().without_blocked_on();
    g.bench_function("stallwarden_proc_table_reused_without_blocked_on", |b| {
        b.iter(|| black_box(bare.sample(root).expect("sample")))
    });
    let mut verdict = procs::ProcTable::new();
    g.bench_function("stallwarden_verdict_peek_with_blocked_on", |b| {
        b.iter(|| black_box(verdict.peek(root).expect("sample")))
    });
    let mut verdict_bare = procs::ProcTable::new().without_blocked_on();
    g.bench_function("stallwarden_verdict_peek_without_blocked_on", |b| {
        b.iter(|| black_box(verdict_bare.peek(root).expect("sample")))
    });
    // A kernel without children lists: the table is walked.
    let mut walking = procs::ProcTable::new().walk_only();
    g.bench_function("stallwarden_proc_table_walk_only_reused", |b| {
        b.iter(|| black_box(walking.sample(root).expect("sample")))
    });
    let mut sys = sysinfo::System::new();
    g.bench_function("sysinfo_refresh_all", |b| {
        b.iter(|| {
            sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
            black_box(sys.processes().len())
        })
    });
    g.finish();
    drop(tree);
}

/// R5.11 with R9.4: what the `net` signal adds to a periodic sample, on
/// 100 processes (a server and 99 clients) holding 199 loopback TCP
/// sockets: the look at every process's descriptors and each socket's
/// `tcp_info` through a descriptor copy (and, for comparison, through the
/// sock_diag dump, and the dump alone), beside the sample of the same tree
/// it follows.
fn net(c: &mut Criterion) {
    let tree = SocketTree::spawn(99);
    let root = tree.pid();
    let mut table = procs::ProcTable::new();
    let pids = table.sample(root).expect("sample").pids;
    assert_eq!(pids.len(), 100, "the server and its 99 clients");
    let mut g = c.benchmark_group("net");
    g.sample_size(30);
    g.bench_function("stallwarden_proc_table_reused_100_procs", |b| {
        b.iter(|| black_box(table.sample(root).expect("sample")))
    });
    let mut meter = procs::NetMeter::new();
    meter.sample(&pids).expect("the baseline");
    g.bench_function("stallwarden_net_meter_100_procs_199_sockets", |b| {
        b.iter(|| black_box(meter.sample(&pids).expect("net sample")))
    });
    let mut dump = procs::NetMeter::new().dump_only();
    dump.sample(&pids).expect("the baseline");
    g.bench_function(
        "stallwarden_net_meter_dump_only_100_procs_199_sockets",
        |b| b.iter(|| black_box(dump.sample(&pids).expect("net sample"))),
    );
    g.bench_function("stallwarden_tcp_bytes_received_dump", |b| {
        b.iter(|| black_box(procs::net::tcp_bytes_received().expect("dump").len()))
    });
    // The same three in this thread's CPU time (user and kernel), which a
    // machine loaded by other work inflates far less than wall time.
    g.bench_function("thread_cpu/stallwarden_proc_table_reused_100_procs", |b| {
        b.iter_custom(|n| thread_cpu(n, || drop(black_box(table.sample(root)))))
    });
    g.bench_function(
        "thread_cpu/stallwarden_net_meter_100_procs_199_sockets",
        |b| b.iter_custom(|n| thread_cpu(n, || drop(black_box(meter.sample(&pids))))),
    );
    g.bench_function(
        "thread_cpu/stallwarden_net_meter_dump_only_100_procs_199_sockets",
        |b| b.iter_custom(|n| thread_cpu(n, || drop(black_box(dump.sample(&pids))))),
    );
    g.finish();
    drop(tree);
}

/// The CPU time this thread spends running `f` `n` times.
fn thread_cpu(n: u64, mut f: impl FnMut()) -> std::time::Duration {
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec and the clock id is
        // valid on Linux.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let start = now();
    for _ in 0..n {
        f();
    }
    now() - start
}

criterion_group!(benches, sampling, net);
criterion_main!(benches);
