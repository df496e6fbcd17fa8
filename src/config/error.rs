//! Config errors: a context struct that names the file, the line and column
//! and the key path, around a kind that says what was wrong (R7.2). The
//! library describes; the CLI prints the `Display` form as is.

use std::fmt;

use watchdog_core::ProfileError;

/// A line and column in a config file, both counted from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub column: usize,
}

impl Location {
    /// Finds the line and column of byte `offset` in `text`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden::config::Location;
    /// let loc = Location::of_offset("a = 1\nidle = \"x\"\n", 13);
    /// assert_eq!((loc.line, loc.column), (2, 8));
    /// ```
    pub fn of_offset(text: &str, offset: usize) -> Location {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Location {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What was wrong with a config.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Read(std::io::Error),
    /// The file is not a regular file (a device, a FIFO, a directory):
    /// refused before reading it (R8.12). Holds what it is.
    NotAFile(&'static str),
    /// The file is larger than [`super::MAX_CONFIG_BYTES`]: refused before
    /// reading it whole (R8.12). Holds its size in bytes.
    TooLarge(u64),
    /// The text is not valid TOML.
    Syntax(String),
    /// A key is unknown or a value has the wrong type or form (the core's
    /// [`ProfileError::problem`] for a profile option, R10.6); the message
    /// says what was expected.
    Invalid(String),
    /// A value is outside its allowed range.
    OutOfRange(ProfileError),
    /// No `[profile.NAME]` table has the requested name.
    UnknownProfile {
        /// The requested name.
        name: String,
        /// The names the file defines.
        known: Vec<String>,
    },
}

/// A config that could not be loaded, or a profile that could not be chosen.
///
/// Its `Display` form is one line: `FILE:LINE:COL: KEY.PATH: what was
/// expected`, leaving out what is unknown.
///
/// # Examples
///
/// ```
/// use stallwarden::config::Config;
///
/// let err = Config::from_str("[profile.ci]\nidle = \"soon\"\n", "ci.toml").unwrap_err();
/// let msg = err.to_string();
/// assert!(msg.starts_with("ci.toml:2:8: profile.ci.idle: "), "{msg}");
/// assert!(msg.contains("expected a duration"), "{msg}");
/// ```
#[derive(Debug)]
pub struct ConfigError {
    pub(crate) origin: String,
    pub(crate) location: Option<Location>,
    pub(crate) key: Option<String>,
    pub(crate) kind: Box<ConfigErrorKind>,
}

impl ConfigError {
    pub(crate) fn new(origin: &str, kind: ConfigErrorKind) -> Self {
        ConfigError {
            origin: origin.to_owned(),
            location: None,
            key: None,
            kind: Box::new(kind),
        }
    }

    /// Returns the file (or origin name) the error is about.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Returns where in the file, when known.
    pub fn location(&self) -> Option<Location> {
        self.location
    }

    /// Returns the dotted key path (`profile.ci.idle`), when known.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Returns what was wrong.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.kind
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(loc) = self.location {
            write!(f, ":{loc}")?;
        }
        f.write_str(": ")?;
        match &*self.kind {
            ConfigErrorKind::OutOfRange(e) => {
                let key = self.key.as_deref().unwrap_or(&e.key);
                write!(f, "{key} is {}, expected {}", e.found, e.expected)
            }
            kind => {
                if let Some(key) = &self.key {
                    write!(f, "{key}: ")?;
                }
                match kind {
                    ConfigErrorKind::Read(e) => write!(f, "cannot read config: {e}"),
                    ConfigErrorKind::NotAFile(what) => write!(
                        f,
                        "refused: {what}, not a regular file; a config must be a regular \
                         file of at most 1 MiB"
                    ),
                    ConfigErrorKind::TooLarge(size) => write!(
                        f,
                        "refused: {size} bytes, larger than the 1 MiB ({} bytes) a config \
                         may have",
                        super::MAX_CONFIG_BYTES
                    ),
                    ConfigErrorKind::Syntax(m) => write!(f, "invalid TOML: {m}"),
                    ConfigErrorKind::Invalid(m) => f.write_str(m),
                    ConfigErrorKind::UnknownProfile { name, known } => {
                        write!(f, "unknown profile `{name}`")?;
                        if let Some(hint) = closest(name, known.iter().map(String::as_str)) {
                            write!(f, " (did you mean `{hint}`?)")?;
                        }
                        if known.is_empty() {
                            f.write_str("; no [profile.NAME] tables are defined")
                        } else {
                            write!(f, "; known profiles: {}", known.join(", "))
                        }
                    }
                    ConfigErrorKind::OutOfRange(_) => unreachable!("handled above"),
                }
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            ConfigErrorKind::Read(e) => Some(e),
            ConfigErrorKind::OutOfRange(e) => Some(e),
            _ => None,
        }
    }
}

/// Returns the candidate closest to `typo`, if one is close enough to be
/// what was meant.
pub(crate) fn closest<'a>(
    typo: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (typo.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (edit_distance(typo, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_key_suggests_only_near_misses() {
        let keys = ["idle", "deadline", "grace-period"];
        assert_eq!(closest("idel", keys), Some("idle"));
        assert_eq!(closest("grace", keys), None);
        assert_eq!(closest("dedline", keys), Some("deadline"));
        assert_eq!(closest("completely-else", keys), None);
    }
}
