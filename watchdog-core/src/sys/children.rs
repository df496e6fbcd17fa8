//! Who is whose child: the kernel's children lists
//! (`PID/task/TID/children`, Linux 3.5+ with `CONFIG_PROC_CHILDREN`), read
//! per thread and joined, and the scan of every `PID/stat` in the table
//! for a kernel without them (or a question about the whole machine: a
//! process group, a leaked pipe's holders). The same lists read through a
//! held table are [`ProcDir::children`](super::ProcDir::children).

use std::io;
use std::path::Path;

use super::stat::{read_stat, ProcStat};

/// Returns the pids the kernel lists as children of any thread of `pid`
/// (`root/PID/task/TID/children`); `None` when the kernel has no such
/// lists (built without `CONFIG_PROC_CHILDREN`) or `pid` is gone.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{children_of, proc_root};
/// # #[cfg(target_os = "linux")] {
/// let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// assert!(children_of(proc_root(), std::process::id()).unwrap().contains(&child.id()));
/// child.kill().unwrap();
/// child.wait().unwrap();
/// # }
/// ```
pub fn children_of(root: &Path, pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(root.join(format!("{pid}/task"))).ok()?;
    let mut out = Vec::new();
    let mut listed = false;
    for t in tasks.flatten() {
        // A thread that exits meanwhile has no list any more: skip it.
        let Ok(text) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        listed = true;
        out.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    listed.then_some(out)
}

/// Reads the stat line of every process in the table at `root`; processes
/// that vanish meanwhile, and lines that do not parse, are left out. The
/// error is the listing's, when the table itself cannot be read.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, scan};
/// # #[cfg(target_os = "linux")]
/// assert!(scan(proc_root()).unwrap().iter().any(|p| p.pid == std::process::id()));
/// assert!(scan("/nonexistent/proc".as_ref()).is_err());
/// ```
pub fn scan(root: &Path) -> io::Result<Vec<ProcStat>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = read_stat(root, pid) {
            out.push(stat);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::table::ProcDir;
    use super::*;

    #[test]
    fn children_lists_of_every_thread_are_joined() {
        let dir = std::env::temp_dir().join(format!("sys-children-{}", std::process::id()));
        for (tid, kids) in [(10, "11 12 "), (13, "14")] {
            std::fs::create_dir_all(dir.join(format!("10/task/{tid}"))).unwrap();
            std::fs::write(dir.join(format!("10/task/{tid}/children")), kids).unwrap();
        }
        std::fs::create_dir_all(dir.join("20/task/20")).unwrap();
        let mut kids = children_of(&dir, 10).unwrap();
        kids.sort_unstable();
        assert_eq!(kids, vec![11, 12, 14]);
        let mut held = ProcDir::open(&dir).unwrap();
        let mut again = held.children(10).unwrap();
        again.sort_unstable();
        assert_eq!(again, kids);
        // A thread with no list: the kernel has none.
        assert_eq!(children_of(&dir, 20), None);
        assert_eq!(held.children(20), None);
        assert_eq!(children_of(&dir, 30), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // R5.5: the fallback scan reads every process's stat line in the
    // table; a name that is not a pid, a process with no stat (gone
    // meanwhile) and a line that does not parse are left out.
    #[test]
    fn a_scan_reads_every_stat_line_and_leaves_out_the_rest() {
        let dir = std::env::temp_dir().join(format!("sys-scan-{}", std::process::id()));
        for sub in ["5", "6", "7", "self"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let stat = "5 (w) S 1 5 5 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 77 0 0\n";
        std::fs::write(dir.join("5/stat"), stat).unwrap();
        std::fs::write(dir.join("self/stat"), stat).unwrap();
        std::fs::write(dir.join("6/stat"), "6 (trunc").unwrap();
        let found = scan(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, vec![ProcStat::parse(stat.as_bytes()).unwrap()]);
        assert_eq!((found[0].pid, found[0].starttime), (5, 77));
    }
}
