//! The one helper that makes an owner-only directory (R10.6, R8.12): for a
//! notify socket, a control socket staged before it moves into place, or
//! anything else only this user may reach.
//!
//! The directory is always new (`mkdir` never follows a symlink at the
//! path, and an existing name is skipped for the next), made 0700 whatever
//! the umask, then checked through `lstat` before it is handed out: a
//! directory (not a symlink), owned by this process's effective user, mode
//! exactly 0700. Anything else is refused with what was found, and the
//! name is left alone.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many names are tried before giving up on a crowded parent.
const ATTEMPTS: u32 = 16;

/// Why an owner-only directory could not be made.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::private_dir;
/// let e = private_dir("/nonexistent/parent".as_ref(), "sg-").unwrap_err();
/// assert!(e.to_string().starts_with("cannot create a private directory under /nonexistent/parent: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivateDirError {
    /// `mkdir` (or making the new directory 0700) failed.
    #[error("cannot create a private directory under {}: {source}", parent.display())]
    Create {
        /// The parent directory tried.
        parent: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// What is at the new path is not a 0700 directory of this user (it
    /// was replaced meanwhile); it is left as it is.
    #[error("refusing {} as a private directory: {why}", path.display())]
    NotPrivate {
        /// The path.
        path: PathBuf,
        /// What was found there.
        why: String,
    },
}

/// Creates a fresh directory under `parent` that only this user can enter,
/// named `{prefix}{pid}-{seq}-{nanos}`, and returns its path; the caller
/// removes it when done.
///
/// # Examples
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use watchdog_core::sys::private_dir;
///
/// let parent = std::env::temp_dir();
/// let dir = private_dir(&parent, "doc-").unwrap();
/// let meta = std::fs::symlink_metadata(&dir).unwrap();
/// assert!(meta.is_dir());
/// assert_eq!(meta.permissions().mode() & 0o777, 0o700);
/// std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn private_dir(parent: &Path, prefix: &str) -> Result<PathBuf, PrivateDirError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    create_fresh(parent, || {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        parent.join(format!("{prefix}{}-{seq}-{nanos:x}", std::process::id()))
    })
}

/// [`private_dir`] with the names to try coming from `next_name`: a name
/// that exists is skipped for the next, any other failure is final.
fn create_fresh(
    parent: &Path,
    mut next_name: impl FnMut() -> PathBuf,
) -> Result<PathBuf, PrivateDirError> {
    let create = |source| PrivateDirError::Create {
        parent: parent.to_path_buf(),
        source,
    };
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let dir = next_name();
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(create(e)),
        }
        // The umask may have taken bits away (even the owner's).
        if let Err(e) = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)) {
            let _ = std::fs::remove_dir(&dir);
            return Err(create(e));
        }
        return match check(&dir) {
            Ok(()) => Ok(dir),
            Err(why) => Err(PrivateDirError::NotPrivate { path: dir, why }),
        };
    }
    Err(create(last.unwrap_or_else(|| {
        io::Error::from(io::ErrorKind::AlreadyExists)
    })))
}

/// Checks, without following a symlink, that `dir` is a directory of this
/// process's effective user with mode 0700; says what it is otherwise.
fn check(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect it: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err("it is a symlink".into());
    }
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "it is owned by uid {}, not by this user (uid {me})",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode != 0o700 {
        return Err(format!("its mode is {mode:o}, not 700"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_makes_a_new_0700_directory() {
        let parent = std::env::temp_dir();
        let a = private_dir(&parent, "sg-test-").unwrap();
        let b = private_dir(&parent, "sg-test-").unwrap();
        assert_ne!(a, b);
        for d in [&a, &b] {
            assert!(check(d).is_ok());
            std::fs::remove_dir(d).unwrap();
        }
    }

    #[test]
    fn a_symlink_a_file_and_a_wide_mode_are_refused() {
        let parent = std::env::temp_dir();
        let dir = private_dir(&parent, "sg-test-").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&parent, &link).unwrap();
        assert_eq!(check(&link), Err("it is a symlink".into()));
        let file = dir.join("file");
        std::fs::write(&file, "").unwrap();
        assert_eq!(check(&file), Err("it is not a directory".into()));
        let wide = dir.join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check(&wide), Err("its mode is 755, not 700".into()));
        for p in [&link, &file] {
            std::fs::remove_file(p).unwrap();
        }
        std::fs::remove_dir(&wide).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    // A name someone already holds (a file, a directory, a symlink an
    // attacker planted) is skipped and left alone; the next name is used.
    #[test]
    fn a_taken_name_is_skipped_for_the_next_and_left_alone() {
        let parent = private_dir(&std::env::temp_dir(), "sg-test-").unwrap();
        let taken = parent.join("taken");
        std::os::unix::fs::symlink("/", &taken).unwrap();
        let fresh = parent.join("fresh");
        let mut names = [taken.clone(), fresh.clone()].into_iter();
        let got = create_fresh(&parent, || names.next().unwrap()).unwrap();
        assert_eq!(got, fresh);
        assert!(check(&fresh).is_ok());
        assert!(std::fs::symlink_metadata(&taken).unwrap().is_symlink());
        std::fs::remove_file(&taken).unwrap();
        std::fs::remove_dir(&fresh).unwrap();
        std::fs::remove_dir(&parent).unwrap();
    }

    // Any other failure is final: a missing parent is said at once, not
    // retried; a parent whose every name is taken is given up on after
    // ATTEMPTS names, saying the names exist.
    #[test]
    fn only_a_taken_name_is_retried_and_only_so_often() {
        let missing = Path::new("/nonexistent/sg-parent");
        let mut tried = 0;
        let err = create_fresh(missing, || {
            tried += 1;
            missing.join(format!("d{tried}"))
        })
        .unwrap_err();
        assert_eq!(tried, 1);
        let PrivateDirError::Create { parent, source } = err else {
            panic!("{err}")
        };
        assert_eq!(
            (parent.as_path(), source.kind()),
            (missing, io::ErrorKind::NotFound)
        );
        let crowded = std::env::temp_dir();
        let mut tried = 0;
        let err = create_fresh(&crowded, || {
            tried += 1;
            crowded.clone()
        })
        .unwrap_err();
        assert_eq!(tried, ATTEMPTS);
        assert!(
            matches!(&err, PrivateDirError::Create { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
            "{err}"
        );
    }

    #[test]
    fn someone_elses_directory_is_refused() {
        // `/` is root's: from any other user it is someone else's; as root
        // its mode (755) is refused instead. Either way, never accepted.
        let why = check(Path::new("/")).unwrap_err();
        assert!(
            why.contains("owned by uid 0") || why.contains("mode is 755"),
            "{why}"
        );
    }
}
