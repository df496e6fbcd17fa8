//! The socket file (R6.5): refuse a path the server must not take over,
//! replace a stale socket of ours, bind owner-only whatever the umask, and
//! remove the file on the way out only if it is still ours.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use super::{io_err, ControlError};

/// Refuses a path the server must not take over; removes a stale socket.
pub(super) fn check_existing(path: &Path) -> Result<(), ControlError> {
    let refuse = |why: String| ControlError::Refused {
        path: path.to_owned(),
        why,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path, "inspect the path")(e)),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(refuse(
            "it is a symbolic link, which is never followed".into(),
        ));
    }
    if !kind.is_socket() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        return Err(refuse(format!(
            "it exists and is {what}, which is never replaced"
        )));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "the socket is owned by uid {}, not by this user (uid {me})",
            meta.uid()
        )));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(refuse("a server is already listening on it".into())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing a stale control socket");
            std::fs::remove_file(path).map_err(io_err(path, "remove the stale socket"))
        }
        Err(e) => Err(refuse(format!("cannot tell whether it is in use: {e}"))),
    }
}

/// Binds inside a fresh 0700 directory next to `path`, sets 0600, and moves
/// the socket into place without replacing anything: the socket is never
/// reachable by others with a wider mode, whatever the umask. Returns the
/// listener and the socket file's identity (device, inode).
pub(super) fn bind_private(path: &Path) -> Result<(UnixListener, (u64, u64)), ControlError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // One helper makes every owner-only directory (R10.6): created 0700
    // whatever the umask, then checked to be ours and private.
    let private = watchdog_core::sys::private_dir(parent, ".sgctl.").map_err(|e| match e {
        watchdog_core::sys::PrivateDirError::Create { source, .. } => {
            io_err(path, "create a private directory beside it")(source)
        }
        other => ControlError::Refused {
            path: path.to_owned(),
            why: other.to_string(),
        },
    })?;
    let staged = private.join("s");
    let result = (|| {
        let listener = UnixListener::bind(&staged).map_err(io_err(path, "bind"))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(path, "set mode 0600"))?;
        let meta =
            std::fs::symlink_metadata(&staged).map_err(io_err(path, "inspect the new socket"))?;
        let here = nix::fcntl::AT_FDCWD;
        nix::fcntl::renameat2(
            here,
            &staged,
            here,
            path,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST => ControlError::Refused {
                path: path.to_owned(),
                why: "something else was created at the path while binding".into(),
            },
            e => io_err(path, "move the socket into place")(e.into()),
        })?;
        Ok((listener, (meta.dev(), meta.ino())))
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    result
}

/// Removes the socket file if it is still the one with `identity`.
pub(super) fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if (meta.dev(), meta.ino()) == identity {
            let _ = std::fs::remove_file(path);
        }
    }
}
