//! Criterion bench of process-table sampling (SPEC R5.5, R9.4): one full
//! sample of a real process tree's descendants through stallguard's
//! `/proc` reader (following the kernel's children lists, and walking the
//! table as a kernel without them makes it), against `sysinfo`'s refresh of every process (what a user
//! must do to find descendants with it). The side-by-side table with `ps`
//! is `cargo bench --bench compare`.
//!
//! Run: `cargo bench -p stallguard --bench sampling`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stallguard::sources::procs;

#[path = "support/mod.rs"]
mod support;
use support::Tree;

fn sampling(c: &mut Criterion) {
    let tree = Tree::spawn();
    let root = tree.pid();
    let mut g = c.benchmark_group("sampling");
    g.sample_size(30);
    g.bench_function("stallguard_sample_once", |b| {
        b.iter(|| black_box(procs::sample_once(root).expect("sample")))
    });
    let mut table = procs::ProcTable::new();
    g.bench_function("stallguard_proc_table_reused", |b| {
        b.iter(|| black_box(table.sample(root).expect("sample")))
    });
    // R8.13: the same sample without the blocking points (what a sample
    // cost before them), and the verdict's look, which asks every process.
    let mut bare = procs::ProcTable::new().without_blocked_on();
    g.bench_function("stallguard_proc_table_reused_without_blocked_on", |b| {
        b.iter(|| black_box(bare.sample(root).expect("sample")))
    });
    let mut verdict = procs::ProcTable::new();
    g.bench_function("stallguard_verdict_peek_with_blocked_on", |b| {
        b.iter(|| black_box(verdict.peek(root).expect("sample")))
    });
    let mut verdict_bare = procs::ProcTable::new().without_blocked_on();
    g.bench_function("stallguard_verdict_peek_without_blocked_on", |b| {
        b.iter(|| black_box(verdict_bare.peek(root).expect("sample")))
    });
    // A kernel without children lists: the table is walked.
    let mut walking = procs::ProcTable::new().walk_only();
    g.bench_function("stallguard_proc_table_walk_only_reused", |b| {
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

criterion_group!(benches, sampling);
criterion_main!(benches);
