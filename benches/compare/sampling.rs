//! Process sampling (R9.4): stallwarden's samplers against sysinfo and a
//! spawned `ps`, on a real process tree.

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stallwarden_sources::procs;

use crate::harness::{per_op, run_round_robin, Contender};
use crate::support::Tree;
use crate::SAMPLER_BATCHES;

/// Samples a real tree with every contender, round-robin, and returns
/// them with their samples: the one-shot sampler first, the reused second.
pub(crate) fn samplers() -> Vec<Contender> {
    // --- Process sampling (R9.4) --------------------------------------------
    let tree = Tree::spawn();
    let root = tree.pid();
    // Let the shell fork its children before the first sample.
    let settle = Instant::now();
    while sample_with_ps(root).len() < 4 && settle.elapsed() < Duration::from_secs(5) {
        std::thread::yield_now();
    }
    let mut samplers = Vec::new();
    samplers.push(Contender::new(
        "stallwarden procs::sample_once (one-shot)",
        40,
        move |n| {
            per_op(n, |_| {
                drop(black_box(procs::sample_once(root).expect("sample")));
            })
        },
    ));
    samplers.push(reused_table(
        "stallwarden procs::ProcTable::sample (reused)",
        procs::ProcTable::new(),
        root,
    ));
    // What a kernel without children lists gets: the table walked.
    samplers.push(reused_table(
        "diag: ProcTable walk_only (reused)",
        procs::ProcTable::new().walk_only(),
        root,
    ));
    {
        let mut sys = sysinfo::System::new();
        sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
        samplers.push(Contender::new(
            "sysinfo refresh_processes(All) + walk",
            20,
            move |n| per_op(n, |_| drop(black_box(sample_with_sysinfo(&mut sys, root)))),
        ));
    }
    samplers.push(Contender::new(
        "spawn ps -e -o pid,ppid,etime,time,comm",
        4,
        move |n| per_op(n, |_| drop(black_box(sample_with_ps(root)))),
    ));
    run_round_robin(&mut samplers, SAMPLER_BATCHES);
    drop(tree);
    samplers
}

/// A contender sampling `root` through a table kept across samples.
fn reused_table(name: &'static str, mut table: procs::ProcTable, root: u32) -> Contender {
    table.sample(root).expect("sample");
    Contender::new(name, 40, move |n| {
        per_op(n, |_| {
            drop(black_box(table.sample(root).expect("sample")));
        })
    })
}

/// The descendants of `root` in a (pid, ppid) table, breadth first.
fn descendants(table: &[(u32, u32)], root: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid) in table {
            if ppid == p {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out
}

/// A descendant as `ps` reports it.
#[derive(Debug)]
#[allow(dead_code)] // fields are read through black_box only
struct PsRow {
    pid: u32,
    ppid: u32,
    etime: String,
    time: String,
    comm: String,
}

/// What a user would do without a sampler: spawn `ps`, parse, walk the tree.
fn sample_with_ps(root: u32) -> Vec<PsRow> {
    let out = Command::new("ps")
        .args(["-e", "-o", "pid=,ppid=,etime=,time=,comm="])
        .stderr(Stdio::null())
        .output()
        .expect("run ps");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<PsRow> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some(PsRow {
                pid: f.next()?.parse().ok()?,
                ppid: f.next()?.parse().ok()?,
                etime: f.next()?.to_owned(),
                time: f.next()?.to_owned(),
                comm: f.collect::<Vec<_>>().join(" "),
            })
        })
        .collect();
    let table: Vec<(u32, u32)> = rows.iter().map(|r| (r.pid, r.ppid)).collect();
    let keep = descendants(&table, root);
    rows.into_iter().filter(|r| keep.contains(&r.pid)).collect()
}

/// What a user would do with `sysinfo`: refresh every process (it cannot
/// refresh "descendants of X"), then walk parents.
fn sample_with_sysinfo(sys: &mut sysinfo::System, root: u32) -> Vec<(u32, String, u64)> {
    sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
    let table: Vec<(u32, u32)> = sys
        .processes()
        .iter()
        .filter_map(|(pid, p)| Some((pid.as_u32(), p.parent()?.as_u32())))
        .collect();
    descendants(&table, root)
        .into_iter()
        .filter_map(|pid| {
            let p = sys.process(sysinfo::Pid::from_u32(pid))?;
            Some((
                pid,
                p.name().to_string_lossy().into_owned(),
                p.accumulated_cpu_time(),
            ))
        })
        .collect()
}
