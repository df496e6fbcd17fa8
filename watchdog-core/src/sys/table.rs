//! A `/proc` directory held open (R5.5, R9.4): [`ProcDir`] opens the
//! table's directory once and reads small files relative to it
//! (`openat`), into one reused buffer, so a sample of a tree costs one
//! `openat` and one `read` per file and no path walk from `/`. It reads
//! `PID/stat` (a [`ProcStat`]), `PID/wchan` (the kernel function a process
//! sleeps in), `loadavg` (the kernel's pid counter) and the directory's
//! listing (the pids); `children.rs` adds the children lists.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::stat::{ProcStat, StatError};

/// A `/proc`-shaped directory held open, with a buffer reused from one
/// read to the next.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, ProcDir};
/// # #[cfg(target_os = "linux")] {
/// let mut dir = ProcDir::open(proc_root()).unwrap();
/// let me = std::process::id();
/// assert_eq!(dir.stat(me).unwrap().unwrap().pid, me);
/// assert!(dir.pids().unwrap().contains(&me));
/// assert!(dir.last_pid().is_some());
/// # }
/// assert!(ProcDir::open("/nonexistent/proc").is_err());
/// ```
#[derive(Debug)]
pub struct ProcDir {
    root: PathBuf,
    dir: OwnedFd,
    pub(super) buf: Vec<u8>,
}

impl ProcDir {
    /// Opens the directory at `root` (the system's is
    /// [`proc_root`](super::proc_root)); the error is the OS's.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<ProcDir> {
        let root = root.into();
        let path = std::ffi::CString::new(root.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a NUL-terminated path and flags; the result is checked.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ProcDir {
            root,
            dir,
            buf: vec![0; 1024],
        })
    }

    /// Returns the directory's path, as given to [`ProcDir::open`].
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lists the pids in the directory (its all-digit names), in the order
    /// the kernel gives them.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        pids(&self.root)
    }

    /// Reads `PID/stat` and parses it: `None` when the process is gone,
    /// the parser's error when its line is not a stat line.
    pub fn stat(&mut self, pid: u32) -> Option<Result<ProcStat, StatError>> {
        let mut name = [0u8; 24];
        let bytes = self.read(pid_path(&mut name, pid, b"/stat"))?;
        Some(ProcStat::parse(bytes))
    }

    /// Reads `PID/wchan`, the kernel function the process sleeps in;
    /// `None` when it is gone, runs, or the kernel hides it (`0`).
    pub fn wchan(&mut self, pid: u32) -> Option<String> {
        let mut name = [0u8; 24];
        let bytes = self.read(pid_path(&mut name, pid, b"/wchan"))?;
        let text = std::str::from_utf8(bytes).ok()?.trim();
        (!text.is_empty() && text != "0").then(|| text.to_owned())
    }

    /// Reads the last pid the kernel allocated (`loadavg`'s last field).
    pub fn last_pid(&mut self) -> Option<u32> {
        let bytes = self.read(c"loadavg")?;
        let text = std::str::from_utf8(bytes).ok()?;
        text.split_ascii_whitespace().nth(4)?.parse().ok()
    }

    /// Returns the pids the kernel lists as children of any thread of
    /// `pid`, read through the held directory; `None` when the lists cannot
    /// be read (no such process, or a kernel without them).
    pub fn children(&mut self, pid: u32) -> Option<Vec<u32>> {
        let tasks = std::fs::read_dir(self.root().join(format!("{pid}/task"))).ok()?;
        let mut kids = Vec::new();
        let mut any = false;
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            let path = std::ffi::CString::new(format!("{pid}/task/{tid}/children")).ok()?;
            // A thread that ended since the listing has no file any more.
            let Some(bytes) = self.read(&path) else {
                continue;
            };
            any = true;
            let text = std::str::from_utf8(bytes).ok()?;
            kids.extend(
                text.split_ascii_whitespace()
                    .filter_map(|k| k.parse::<u32>().ok()),
            );
        }
        any.then_some(kids)
    }

    /// Reads a small file at `path`, relative to the directory, into the
    /// buffer; `None` if it cannot be opened or read.
    pub fn read(&mut self, path: &CStr) -> Option<&[u8]> {
        // SAFETY: a directory fd we hold, a NUL-terminated relative path.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                path.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // One read returns a whole stat line; keep reading only if the
        // buffer filled up.
        let mut len = 0;
        loop {
            if len == self.buf.len() {
                self.buf.resize(len * 2, 0);
            }
            let room = &mut self.buf[len..];
            // SAFETY: `room` is writable for its length.
            let n = unsafe { libc::read(fd.as_raw_fd(), room.as_mut_ptr().cast(), room.len()) };
            match n {
                0 => return Some(&self.buf[..len]),
                n if n > 0 => {
                    len += n as usize;
                    if self.buf[len - 1] == b'\n' {
                        return Some(&self.buf[..len]);
                    }
                }
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => return None,
            }
        }
    }
}

/// Lists the pids in the table at `root` (its all-digit names), in the
/// order the kernel gives them; the OS error when it cannot be listed.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{pids, proc_root};
/// # #[cfg(target_os = "linux")]
/// assert!(pids(proc_root()).unwrap().contains(&std::process::id()));
/// assert!(pids("/nonexistent/proc".as_ref()).is_err());
/// ```
pub fn pids(root: &Path) -> io::Result<Vec<u32>> {
    let mut pids = Vec::with_capacity(256);
    for entry in std::fs::read_dir(root)?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        pids.push(pid);
    }
    Ok(pids)
}

/// Writes `{pid}{suffix}\0` into `buf` without allocating.
pub(super) fn pid_path<'a>(buf: &'a mut [u8; 24], pid: u32, suffix: &[u8]) -> &'a CStr {
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = &digits[i..];
    let end = digits.len() + suffix.len();
    buf[..digits.len()].copy_from_slice(digits);
    buf[digits.len()..end].copy_from_slice(suffix);
    buf[end] = 0;
    CStr::from_bytes_with_nul(&buf[..=end]).expect("one NUL, at the end")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_built_without_allocating() {
        let mut b = [0u8; 24];
        assert_eq!(pid_path(&mut b, 0, b"/stat").to_bytes(), b"0/stat");
        assert_eq!(
            pid_path(&mut b, u32::MAX, b"/wchan").to_bytes(),
            b"4294967295/wchan"
        );
    }

    #[test]
    fn a_fixture_table_reads_and_a_long_file_grows_the_buffer() {
        let dir = std::env::temp_dir().join(format!("sys-table-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("7")).unwrap();
        std::fs::create_dir_all(dir.join("self")).unwrap();
        std::fs::write(dir.join("loadavg"), "0.1 0.2 0.3 1/99 4321\n").unwrap();
        std::fs::write(dir.join("7/wchan"), "0").unwrap();
        // No newline at the end, longer than the buffer: read to EOF.
        let long = format!(
            "7 ({}) S 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 9 0 0",
            "x".repeat(3000)
        );
        std::fs::write(dir.join("7/stat"), &long).unwrap();
        let mut t = ProcDir::open(&dir).unwrap();
        assert_eq!(t.pids().unwrap(), vec![7]);
        assert_eq!(t.last_pid(), Some(4321));
        assert_eq!(t.wchan(7), None);
        assert_eq!(t.stat(7).unwrap().unwrap().comm.len(), 3000);
        assert!(t.stat(8).is_none());
        std::fs::write(dir.join("7/stat"), "garbage\n").unwrap();
        assert_eq!(t.stat(7), Some(Err(StatError::NoCommand)));
        std::fs::write(dir.join("7/wchan"), "pipe_read").unwrap();
        assert_eq!(t.wchan(7).as_deref(), Some("pipe_read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // R5.5: a table that cannot be read says so and samples nothing: a
    // missing root is the OS's error at open, and a file that cannot be
    // read (a directory where a stat line should be: EISDIR) is no
    // answer, given at once. The read runs on a thread so that a reader
    // that kept retrying would fail the test, not hang it.
    #[test]
    fn an_unreadable_root_or_file_is_an_error_not_a_hang() {
        let missing = ProcDir::open("/nonexistent/sys-table").unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let dir = std::env::temp_dir().join(format!("sys-table-dir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("7/stat")).unwrap();
        let mut t = ProcDir::open(&dir).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let got = (t.stat(7), t.read(c"7").map(<[u8]>::to_vec));
            let _ = tx.send(got);
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got, Ok((None, None)));
    }

    // R5.5, R9.4: the table's directory is a directory and stays ours: a
    // root that is a file is refused (ENOTDIR) rather than held, and the
    // held descriptor is close-on-exec, so no child the command spawns
    // inherits it.
    #[test]
    fn the_held_root_must_be_a_directory_and_is_not_inherited() {
        let file = std::env::temp_dir().join(format!("sys-table-file-{}", std::process::id()));
        std::fs::write(&file, b"not a table").unwrap();
        let refused = ProcDir::open(&file).map(|_| ());
        std::fs::remove_file(&file).unwrap();
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::ENOTDIR));
        let held = ProcDir::open(super::super::proc_root()).unwrap();
        // SAFETY: F_GETFD on a descriptor the table owns.
        let flags = unsafe { libc::fcntl(held.dir.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
    }
}
