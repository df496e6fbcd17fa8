//! Settling at scale (issue 22, R8.6): N concurrent
//! `stallwarden run --idle 1s -- sleep 60` runs, each stopped after one
//! second of silence, then settling (the group's exit confirmed, leftovers
//! looked for). Reports, per N, the wall time from the first start to the
//! last exit and the CPU all the runs used (user + system, from
//! `getrusage(RUSAGE_CHILDREN)`, which counts each run and the `sleep` it
//! reaped). Not a test and not timed by criterion: nothing asserts.
//!
//! Run: `cargo bench -p stallwarden --bench settle`; `SETTLE_N=30,300`
//! (the default) picks the sizes, `SETTLE_ROUNDS=3` (default) the runs
//! per size (the median is reported, with min and max).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// User + system CPU of the waited-for children so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One round: N concurrent stalled runs; returns (wall, cpu, exit codes
/// other than 124).
fn round(bin: &str, n: usize) -> (Duration, Duration, usize) {
    let cpu0 = children_cpu();
    let t0 = Instant::now();
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        let child = Command::new(bin)
            .args(["run", "--idle", "1s", "--grace", "5s", "--", "sleep", "60"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start stallwarden");
        runs.push(child);
    }
    let mut odd = 0;
    for mut c in runs {
        let status = c.wait().expect("wait for stallwarden");
        if status.code() != Some(124) {
            odd += 1;
        }
    }
    (t0.elapsed(), children_cpu() - cpu0, odd)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let bin = env!("CARGO_BIN_EXE_stallwarden");
    let sizes: Vec<usize> = std::env::var("SETTLE_N")
        .unwrap_or_else(|_| "30,300".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rounds: usize = std::env::var("SETTLE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    println!(
        "settle: N concurrent `stallwarden run --idle 1s -- sleep 60`, {rounds} round(s) each"
    );
    println!(
        "{:>5}  {:>22}  {:>22}  {:>6}",
        "N", "wall med (min..max)", "cpu med (min..max)", "not124"
    );
    for n in sizes {
        let mut walls = Vec::new();
        let mut cpus = Vec::new();
        let mut odd = 0;
        for _ in 0..rounds {
            let (w, c, o) = round(bin, n);
            walls.push(w);
            cpus.push(c);
            odd += o;
        }
        walls.sort();
        cpus.sort();
        let f = |v: &[Duration]| {
            format!(
                "{:.2}s ({:.2}..{:.2})",
                v[v.len() / 2].as_secs_f64(),
                v[0].as_secs_f64(),
                v[v.len() - 1].as_secs_f64()
            )
        };
        println!("{n:>5}  {:>22}  {:>22}  {odd:>6}", f(&walls), f(&cpus));
    }
}
