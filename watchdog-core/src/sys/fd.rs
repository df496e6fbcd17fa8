//! A process's descriptors: `PID/fd/N` (the link naming what the
//! descriptor is: `pipe:[INODE]`, `socket:[INODE]`, a path, a terminal;
//! and, followed, the file's metadata) and `PID/fdinfo/N` (its flags, and
//! for an epoll instance the descriptors it watches). This process's own
//! descriptors are read through `self`.

use std::fs::Metadata;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

fn fd_path(root: &Path, pid: u32, fd: u64) -> PathBuf {
    root.join(format!("{pid}/fd/{fd}"))
}

/// Reads the link `root/PID/fd/N`: what descriptor `fd` of `pid` is, as
/// the kernel names it (`pipe:[4026532]`, `socket:[77]`, `/dev/pts/3`, a
/// path), made UTF-8 lossily.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{fd_target, proc_root};
/// # #[cfg(target_os = "linux")] {
/// use std::process::{Command, Stdio};
/// let mut child = Command::new("true").stdout(Stdio::piped()).spawn().unwrap();
/// let fd = std::os::fd::AsRawFd::as_raw_fd(child.stdout.as_ref().unwrap()) as u64;
/// assert!(fd_target(proc_root(), std::process::id(), fd).unwrap().starts_with("pipe:["));
/// child.wait().unwrap();
/// # }
/// ```
pub fn fd_target(root: &Path, pid: u32, fd: u64) -> io::Result<String> {
    Ok(std::fs::read_link(fd_path(root, pid, fd))?
        .to_string_lossy()
        .into_owned())
}

/// Returns the metadata of the file behind descriptor `fd` of `pid` (the
/// link `root/PID/fd/N` followed): its type, device, inode.
pub fn fd_metadata(root: &Path, pid: u32, fd: u64) -> io::Result<Metadata> {
    std::fs::metadata(fd_path(root, pid, fd))
}

/// Returns true when descriptor `fd` of `pid` is a FIFO (a named pipe).
pub fn fd_is_fifo(root: &Path, pid: u32, fd: u64) -> bool {
    fd_metadata(root, pid, fd).is_ok_and(|m| m.file_type().is_fifo())
}

/// Lists up to `limit` of `pid`'s descriptors with their links, in the
/// order the kernel gives them; descriptors closed while they are read are
/// left out. The OS error when the list itself cannot be read.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{fd_links, proc_root};
/// # #[cfg(target_os = "linux")] {
/// let links = fd_links(proc_root(), std::process::id(), usize::MAX).unwrap();
/// assert!(!links.is_empty());
/// # }
/// ```
pub fn fd_links(root: &Path, pid: u32, limit: usize) -> io::Result<Vec<(u64, String)>> {
    let dir = std::fs::read_dir(root.join(format!("{pid}/fd")))?;
    Ok(dir
        .flatten()
        .take(limit)
        .filter_map(|e| {
            let fd = e.file_name().to_str()?.parse().ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            Some((fd, link.to_string_lossy().into_owned()))
        })
        .collect())
}

/// Lists the descriptors `pid` has open, in no order; none when they
/// cannot be read.
pub fn open_fds(root: &Path, pid: u32) -> Vec<u64> {
    std::fs::read_dir(root.join(format!("{pid}/fd")))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads `root/PID/fdinfo/N` whole.
pub fn fdinfo(root: &Path, pid: u32, fd: u64) -> io::Result<String> {
    std::fs::read_to_string(root.join(format!("{pid}/fdinfo/{fd}")))
}

/// Returns the open flags of descriptor `fd` of `pid` (`fdinfo`'s
/// `flags:`, octal); `None` when it cannot be read.
pub fn fd_flags(root: &Path, pid: u32, fd: u64) -> Option<u32> {
    let info = fdinfo(root, pid, fd).ok()?;
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
    u32::from_str_radix(flags.trim(), 8).ok()
}

/// The descriptors an epoll instance watches, from its
/// `/proc/PID/fdinfo/EPFD` (`tfd: N events: ...` lines).
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::epoll_targets;
/// let info = "pos:\t0\ntfd:        0 events:       19 data: 0\ntfd:        7 events: 19 data: 7\n";
/// assert_eq!(epoll_targets(info), vec![0, 7]);
/// ```
pub fn epoll_targets(fdinfo: &str) -> Vec<u64> {
    fdinfo
        .lines()
        .filter_map(|l| l.strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_ascii_whitespace().next()?.parse().ok())
        .collect()
}

/// Parses a descriptor link `socket:[INODE]` into the socket's inode.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::socket_inode;
/// assert_eq!(socket_inode("socket:[4242]"), Some(4242));
/// assert_eq!(socket_inode("pipe:[4242]"), None);
/// ```
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Returns true when `path`, as process `pid` would open it (relative to
/// its working directory, `root/PID/cwd`, unless absolute), is a FIFO.
pub fn cwd_is_fifo(root: &Path, pid: u32, path: &str) -> bool {
    let full = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        root.join(format!("{pid}/cwd/{path}"))
    };
    std::fs::metadata(full).is_ok_and(|m| m.file_type().is_fifo())
}

/// Reads the link of this process's own descriptor `fd`
/// (`/proc/self/fd/N`).
///
/// # Examples
///
/// ```
/// # #[cfg(target_os = "linux")] {
/// use std::process::{Command, Stdio};
/// let mut child = Command::new("true").stdout(Stdio::piped()).spawn().unwrap();
/// let fd = std::os::fd::AsRawFd::as_raw_fd(child.stdout.as_ref().unwrap());
/// assert!(watchdog_core::sys::own_fd_target(fd).unwrap().starts_with("pipe:["));
/// child.wait().unwrap();
/// # }
/// ```
pub fn own_fd_target(fd: RawFd) -> io::Result<String> {
    Ok(std::fs::read_link(own(fd, "fd"))?
        .to_string_lossy()
        .into_owned())
}

/// Returns the metadata of the file behind this process's descriptor `fd`
/// (`/proc/self/fd/N` followed; a socket or a terminal too).
pub fn own_fd_metadata(fd: RawFd) -> io::Result<Metadata> {
    std::fs::metadata(own(fd, "fd"))
}

/// Reads this process's `/proc/self/fdinfo/N` whole.
pub fn own_fdinfo(fd: RawFd) -> io::Result<String> {
    std::fs::read_to_string(own(fd, "fdinfo"))
}

fn own(fd: RawFd, dir: &str) -> PathBuf {
    super::proc_root().join(format!("self/{dir}/{fd}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoll_fdinfo_names_its_targets() {
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n\
                    tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18\n\
                    tfd:        7 events:       19 data:                7  pos:0 ino:9 sdev:d\n";
        assert_eq!(epoll_targets(info), vec![0, 7]);
        assert!(epoll_targets("pos:\t0\n").is_empty());
    }

    #[test]
    fn a_fixture_descriptor_table_reads_back() {
        let dir = std::env::temp_dir().join(format!("sys-fd-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("3/fd")).unwrap();
        std::fs::create_dir_all(dir.join("3/fdinfo")).unwrap();
        std::os::unix::fs::symlink("socket:[99]", dir.join("3/fd/4")).unwrap();
        std::fs::write(dir.join("3/fdinfo/4"), "pos:\t0\nflags:\t02000001\n").unwrap();
        assert_eq!(fd_target(&dir, 3, 4).unwrap(), "socket:[99]");
        assert_eq!(
            fd_links(&dir, 3, 8).unwrap(),
            vec![(4, "socket:[99]".into())]
        );
        assert!(fd_links(&dir, 3, 0).unwrap().is_empty());
        assert_eq!(open_fds(&dir, 3), vec![4]);
        assert_eq!(fd_flags(&dir, 3, 4), Some(0o2000001));
        assert_eq!((fd_flags(&dir, 3, 5), open_fds(&dir, 9)), (None, vec![]));
        assert!(!fd_is_fifo(&dir, 3, 4));
        assert!(fd_links(&dir, 9, 8).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // R8.13: a descriptor is named by what its link says; only a
    // `socket:[INODE]` link gives an inode to look up in the socket tables.
    #[test]
    fn a_socket_link_gives_its_inode_and_no_other_link_does() {
        assert_eq!(socket_inode("socket:[4026532]"), Some(4026532));
        assert_eq!(socket_inode("socket:[0]"), Some(0));
        for other in ["pipe:[77]", "socket:[77", "socket:[x]", "/tmp/socket:[77]"] {
            assert_eq!(socket_inode(other), None, "{other}");
        }
    }

    // R8.13: a FIFO (a named pipe) is told from any other file, behind a
    // descriptor's link and at a path the process would open, relative to
    // its working directory or absolute.
    #[test]
    fn a_fifo_is_told_apart_behind_a_descriptor_and_at_a_path() {
        let dir = std::env::temp_dir().join(format!("sys-fifo-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("work")).unwrap();
        std::fs::create_dir_all(dir.join("3/fd")).unwrap();
        let fifo = dir.join("work/feed");
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the result is checked.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        std::fs::write(dir.join("work/plain"), "").unwrap();
        std::os::unix::fs::symlink(&fifo, dir.join("3/fd/5")).unwrap();
        std::os::unix::fs::symlink(dir.join("work/plain"), dir.join("3/fd/6")).unwrap();
        std::os::unix::fs::symlink(dir.join("work"), dir.join("3/cwd")).unwrap();
        let seen = [
            fd_is_fifo(&dir, 3, 5),
            fd_is_fifo(&dir, 3, 6),
            cwd_is_fifo(&dir, 3, "feed"),
            cwd_is_fifo(&dir, 3, fifo.to_str().unwrap()),
            cwd_is_fifo(&dir, 3, "plain"),
            cwd_is_fifo(&dir, 3, "missing"),
            cwd_is_fifo(&dir, 4, "feed"),
        ];
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(seen, [true, false, true, true, false, false, false]);
    }

    // R8.13: this process's own descriptors read through `self` say what
    // the kernel says of them: a pipe's link names the pipe's inode, its
    // metadata is a FIFO's, its fdinfo holds its open flags (a read end
    // made close-on-exec: O_RDONLY | O_CLOEXEC).
    #[test]
    fn own_descriptors_are_read_through_self() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let (reader, _writer) = std::io::pipe().unwrap();
        let fd = reader.as_raw_fd();
        let meta = own_fd_metadata(fd).unwrap();
        assert!(meta.file_type().is_fifo());
        let target = own_fd_target(fd).unwrap();
        assert_eq!(target, format!("pipe:[{}]", meta.ino()));
        let me = std::process::id();
        assert_eq!(
            target,
            fd_target(super::super::proc_root(), me, fd as u64).unwrap()
        );
        let info = own_fdinfo(fd).unwrap();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"));
        assert_eq!(flags.map(str::trim), Some("02000000"), "{info}");
    }
}
