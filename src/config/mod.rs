//! The TOML configuration (SPEC §7): a `[defaults]` table and named
//! `[profile.NAME]` tables, merged key by key over the built-in defaults
//! shipped as `stallwarden.default.toml`, and validated with the ranges of
//! [`Profile::validate`]. Turning a profile into a running guard is the
//! CLI's job, not this module's.

mod elements;
mod error;
mod raw;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use watchdog_core::Profile;

pub use error::{ConfigError, ConfigErrorKind, Location};
use raw::{profile_keys, RawConfig, RawProfile, TOP_KEYS};

/// The shipped default config: the built-in defaults and their documentation.
pub const DEFAULT_TOML: &str = include_str!("../../stallwarden.default.toml");

/// The name [`Config::profile`] gives the `[defaults]` table.
pub const DEFAULTS_NAME: &str = "defaults";

/// A loaded, validated config: the `[defaults]` table and every named
/// profile, each known to produce a valid [`Profile`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden::config::Config;
///
/// let text = r#"
/// [defaults]
/// idle = "90s"
///
/// [profile.ci]
/// deadline = "1h 30m"
/// "#;
/// let config = Config::from_str(text, "stallwarden.toml").unwrap();
/// let ci = config.profile(Some("ci")).unwrap();
/// assert_eq!(ci.idle, Some(Duration::from_secs(90))); // inherited from [defaults]
/// assert_eq!(ci.deadline, Some(Duration::from_secs(5400)));
/// assert_eq!(config.profile_names(), ["ci"]);
/// assert!(config.profile(Some("nightly")).unwrap_err().to_string().contains("known profiles: ci"));
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    origin: String,
    defaults: RawProfile,
    profiles: BTreeMap<String, RawProfile>,
}

impl Default for Config {
    /// The built-in defaults, with no named profiles.
    fn default() -> Self {
        Config {
            origin: "<built-in defaults>".into(),
            defaults: RawProfile::default(),
            profiles: BTreeMap::new(),
        }
    }
}

impl Config {
    /// Reads and validates the config file at `path`.
    ///
    /// Errors name the file; see [`Config::from_str`].
    ///
    /// A file that is not a regular file, or is larger than
    /// [`MAX_CONFIG_BYTES`], is refused before it is read whole (R8.12):
    /// `-c /dev/zero` is an error, not a process growing without bound.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden::config::Config;
    /// let err = Config::load("/dev/zero").unwrap_err();
    /// assert!(err.to_string().contains("not a regular file"), "{err}");
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = read_bounded(path).map_err(|kind| ConfigError::new(&origin, kind))?;
        Config::from_str(&text, &origin)
    }

    /// Parses and validates config `text`; `origin` names it in errors
    /// (usually the file name).
    ///
    /// Every table is checked here, not only the one a run picks, so a
    /// mistake in a rarely used profile surfaces at `stallwarden check`.
    #[allow(clippy::should_implement_trait)] // two arguments: not FromStr
    pub fn from_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let mut raw = parse(text, origin)?;
        // R10.6: every option goes through the core's one entry, which
        // checks its form and range; errors point at the value.
        raw.defaults.resolve(text, origin, DEFAULTS_NAME)?;
        for (name, table) in &mut raw.profile {
            table.resolve(text, origin, &format!("profile.{name}"))?;
        }
        let config = Config {
            origin: origin.to_owned(),
            defaults: raw.defaults,
            profiles: raw.profile,
        };
        let locate = |table: &RawProfile, path: String, e: watchdog_core::ProfileError| {
            let span = table.span_of(&e.key);
            let mut e = e;
            // Show the value as the user wrote it: humantime would render
            // "40days" as "1month 9days 13h 26m 24s".
            if let Some(written) = span.as_ref().and_then(|s| text.get(s.clone())) {
                e.found = written.trim().trim_matches('"').to_owned();
            }
            let key = e.key.clone();
            let mut err = ConfigError::new(origin, ConfigErrorKind::OutOfRange(e));
            if let Some(span) = span {
                err.location = Some(Location::of_offset(text, span.start));
                err.key = Some(format!("{path}.{key}"));
            }
            err
        };
        let defaults = config.defaults_profile();
        if let Err(e) = defaults.validate() {
            return Err(locate(&config.defaults, DEFAULTS_NAME.into(), e));
        }
        for (name, table) in &config.profiles {
            let mut p = defaults.clone();
            table.apply(&mut p);
            if let Err(e) = p.validate() {
                // Point at the table that set the refused key: the profile
                // if it did, else [defaults] (a cross-key rule such as
                // deadline <= max-deadline can be broken by the mix).
                return Err(if table.span_of(&e.key).is_some() {
                    locate(table, format!("profile.{name}"), e)
                } else {
                    locate(&config.defaults, DEFAULTS_NAME.into(), e)
                });
            }
        }
        Ok(config)
    }

    /// Returns the file (or origin name) this config came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Returns the effective profile `name` (`None` for `[defaults]`):
    /// built-in defaults, overridden by `[defaults]`, overridden by
    /// `[profile.NAME]`.
    ///
    /// An unknown name is an error that lists the known ones.
    pub fn profile(&self, name: Option<&str>) -> Result<Profile, ConfigError> {
        let mut p = self.defaults_profile();
        if let Some(name) = name {
            let table = self.profiles.get(name).ok_or_else(|| {
                ConfigError::new(
                    &self.origin,
                    ConfigErrorKind::UnknownProfile {
                        name: name.to_owned(),
                        known: self.profiles.keys().cloned().collect(),
                    },
                )
            })?;
            table.apply(&mut p);
        }
        Ok(p)
    }

    /// Returns the agent stream format of profile `name` (`None` for
    /// `[defaults]`): the `stream` key of `[profile.NAME]`, else of
    /// `[defaults]`; `None` when unset or `"none"` (R5.10).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden::config::Config;
    /// use stallwarden::sources::agent::Format;
    /// let text = "[defaults]\nstream = \"none\"\n[profile.agent]\nstream = \"claude-code\"\n";
    /// let config = Config::from_str(text, "stallwarden.toml").unwrap();
    /// assert_eq!(config.stream(Some("agent")).unwrap(), Some(Format::ClaudeCode));
    /// assert_eq!(config.stream(None).unwrap(), None);
    /// ```
    pub fn stream(
        &self,
        name: Option<&str>,
    ) -> Result<Option<stallwarden_sources::agent::Format>, ConfigError> {
        // `profile` checks the name and says which exist.
        self.profile(name)?;
        let table = name.and_then(|n| self.profiles.get(n));
        Ok(table
            .and_then(RawProfile::stream)
            .or_else(|| self.defaults.stream())
            .flatten())
    }

    /// Returns the effective run options of profile `name` (`None` for
    /// `[defaults]`), merged as [`Config::profile`] merges budgets.
    pub fn run_options(&self, name: Option<&str>) -> Result<RunOptions, ConfigError> {
        // The same lookup, so an unknown name is the same error.
        self.profile(name)?;
        let mut r = RunOptions::default();
        builtin_raw().apply_run(&mut r);
        self.defaults.apply_run(&mut r);
        if let Some(table) = name.and_then(|n| self.profiles.get(n)) {
            table.apply_run(&mut r);
        }
        Ok(r)
    }

    /// Returns the names of the `[profile.NAME]` tables, sorted.
    pub fn profile_names(&self) -> Vec<&str> {
        self.profiles.keys().map(String::as_str).collect()
    }

    /// Returns every kebab-case key a profile table accepts.
    pub fn keys() -> &'static [&'static str] {
        profile_keys()
    }

    fn defaults_profile(&self) -> Profile {
        let mut p = builtin().clone();
        self.defaults.apply(&mut p);
        p
    }
}

/// The largest config file read: 1 MiB, far above any real config (R8.12).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads a config file, refusing what is not a regular file or is larger
/// than [`MAX_CONFIG_BYTES`] before reading it whole (R8.12). Opened
/// without blocking, so a FIFO is refused, not waited on.
fn read_bounded(path: &Path) -> Result<String, ConfigErrorKind> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(ConfigErrorKind::Read)?;
    let meta = file.metadata().map_err(ConfigErrorKind::Read)?;
    let t = meta.file_type();
    if !t.is_file() {
        return Err(ConfigErrorKind::NotAFile(if t.is_dir() {
            "a directory"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a special file"
        }));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigErrorKind::TooLarge(meta.len()));
    }
    // It may grow between the check and the read: read one byte past the
    // limit at most.
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ConfigErrorKind::Read)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigErrorKind::TooLarge(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map_err(|e| ConfigErrorKind::Read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// How `stallwarden run` runs the command beyond its budgets (R8.5, R8.6,
/// R8.11): the `leak-timeout`, `on-leftover` and `pty` keys of a profile
/// table.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden::config::{Config, OnLeftover, RunOptions};
///
/// let text = "[defaults]\nleak-timeout = \"3s\"\n[profile.dev]\non-leftover = \"keep\"\npty = true\n";
/// let config = Config::from_str(text, "stallwarden.toml").unwrap();
/// let dev = config.run_options(Some("dev")).unwrap();
/// assert_eq!(dev.leak_timeout, Duration::from_secs(3));
/// assert_eq!(dev.on_leftover, OnLeftover::Keep);
/// assert!(dev.pty);
/// assert_eq!(RunOptions::default().leak_timeout, Duration::from_secs(1));
/// assert!(!RunOptions::default().pty);
/// assert_eq!(RunOptions::default().on_stall, None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// How long to wait for processes that still hold the command's stdout
    /// or stderr after it exited before naming them (`leaked`); 1 s.
    pub leak_timeout: std::time::Duration,
    /// What to do with the command's tree left running after it ended.
    pub on_leftover: OnLeftover,
    /// Whether budgets pause while the command waits for input on the
    /// terminal (R8.13); `stall` by default.
    pub on_input_wait: OnInputWait,
    /// Give the command a pseudo-terminal as stdout and stderr; off.
    pub pty: bool,
    /// A shell command run at each stall, before the stop, with the task's
    /// pid, group, suspects and stall line in its environment (R8.14); none.
    pub on_stall: Option<String>,
    /// How long the `on-stall` command may run before its process group is
    /// killed (R8.14); 5 s.
    pub on_stall_timeout: std::time::Duration,
    /// Whether a command a stall stopped is started again (R8.15); `no`.
    pub restart: Restart,
    /// The backoff before the first restart, doubled before each next one
    /// (R8.15); 1 s.
    pub restart_delay: std::time::Duration,
    /// The longest backoff (R8.15); 1 min.
    pub restart_max_delay: std::time::Duration,
    /// How many restarts a run may take; once spent, a stall ends the run
    /// with 124 (R8.15); 3.
    pub max_restarts: u32,
    /// Take the suspects' stacks at a stall, before the stop, where the
    /// tools are installed (R8.14); on.
    pub stacks: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            leak_timeout: std::time::Duration::from_secs(1),
            on_leftover: OnLeftover::Kill,
            on_input_wait: OnInputWait::Stall,
            pty: false,
            on_stall: None,
            on_stall_timeout: std::time::Duration::from_secs(5),
            restart: Restart::No,
            restart_delay: std::time::Duration::from_secs(1),
            restart_max_delay: std::time::Duration::from_secs(60),
            max_restarts: 3,
            stacks: true,
        }
    }
}

/// What `run` does while the command's foreground process waits for what
/// the user types on the terminal (R8.13): `stall` (the default: the wait is
/// silence like any other) or `pause` (every budget pauses, as for Ctrl-Z,
/// R2.8, until it reads).
///
/// # Examples
///
/// ```
/// use stallwarden::config::{Config, OnInputWait};
/// assert_eq!(OnInputWait::default(), OnInputWait::Stall);
/// let config = Config::from_str("[defaults]\non-input-wait = \"pause\"\n", "x.toml").unwrap();
/// assert_eq!(config.run_options(None).unwrap().on_input_wait, OnInputWait::Pause);
/// assert_eq!(OnInputWait::Pause.as_str(), "pause");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnInputWait {
    /// Budgets keep running (the default).
    #[default]
    Stall,
    /// Budgets pause while the command waits for input.
    Pause,
}

impl OnInputWait {
    /// Returns the value as written in a config (`stall`, `pause`).
    pub const fn as_str(self) -> &'static str {
        match self {
            OnInputWait::Stall => "stall",
            OnInputWait::Pause => "pause",
        }
    }
}

/// Whether `run` starts a command again after a stall stopped it (R8.15):
/// `no` (the default) or `on-stall`.
///
/// # Examples
///
/// ```
/// use stallwarden::config::{Config, Restart};
/// assert_eq!(Restart::default(), Restart::No);
/// let text = "[defaults]\nrestart = \"on-stall\"\nrestart-delay = \"2s\"\nmax-restarts = 5\n";
/// let options = Config::from_str(text, "x.toml").unwrap().run_options(None).unwrap();
/// assert_eq!(options.restart, Restart::OnStall);
/// assert_eq!(options.restart_delay, std::time::Duration::from_secs(2));
/// assert_eq!(options.max_restarts, 5);
/// assert_eq!(Restart::OnStall.as_str(), "on-stall");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// A stopped command stays stopped (the default).
    #[default]
    No,
    /// A command a stall (or lost liveness) stopped is started again after
    /// a backoff.
    OnStall,
}

impl Restart {
    /// Returns the value as written in a config (`no`, `on-stall`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Restart::No => "no",
            Restart::OnStall => "on-stall",
        }
    }
}

/// What `run` does with processes of the command's tree still running after
/// it ended (R8.6); they are named either way.
///
/// # Examples
///
/// ```
/// use stallwarden::config::OnLeftover;
/// assert_eq!(OnLeftover::default(), OnLeftover::Kill);
/// assert_eq!(OnLeftover::Keep.as_str(), "keep");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnLeftover {
    /// SIGTERM, then SIGKILL after the grace period (the default).
    #[default]
    Kill,
    /// Leave them running.
    Keep,
}

impl OnLeftover {
    /// Returns the value as written in a config (`kill`, `keep`).
    pub const fn as_str(self) -> &'static str {
        match self {
            OnLeftover::Kill => "kill",
            OnLeftover::Keep => "keep",
        }
    }
}

/// Parses a duration as the CLI flags take it: humantime (`"90s"`,
/// `"1h 30m"`) or `"off"` (`None`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden::config::parse_budget;
/// assert_eq!(parse_budget("90s"), Ok(Some(Duration::from_secs(90))));
/// assert_eq!(parse_budget("off"), Ok(None));
/// assert!(parse_budget("soon").unwrap_err().contains("expected a duration"));
/// ```
pub fn parse_budget(s: &str) -> Result<Option<std::time::Duration>, String> {
    // R10.6: the core's one reading of a budget.
    s.parse::<watchdog_core::Limit>()
        .map(watchdog_core::Limit::duration)
        .map_err(|e| format!("{e}, expected {}, or \"off\"", elements::DURATION_EXPECTED))
}

/// Returns the built-in profile, parsed from [`DEFAULT_TOML`].
///
/// # Examples
///
/// ```
/// assert_eq!(*stallwarden::config::builtin(), watchdog_core::Profile::default());
/// ```
pub fn builtin() -> &'static Profile {
    static BUILTIN: OnceLock<Profile> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let mut p = Profile::default();
        builtin_raw().apply(&mut p);
        p
    })
}

/// The `[defaults]` table of [`DEFAULT_TOML`], for keys that are not part of
/// a [`Profile`] (the run options).
fn builtin_raw() -> &'static RawProfile {
    static RAW: OnceLock<RawProfile> = OnceLock::new();
    RAW.get_or_init(|| {
        let origin = "stallwarden.default.toml";
        let mut raw = parse(DEFAULT_TOML, origin)
            .unwrap_or_else(|e| panic!("the embedded default config is broken: {e}"))
            .defaults;
        raw.resolve(DEFAULT_TOML, origin, DEFAULTS_NAME)
            .unwrap_or_else(|e| panic!("the embedded default config is broken: {e}"));
        raw
    })
}

/// Parses TOML into the raw tables, mapping every failure to a located,
/// key-pathed error.
fn parse(text: &str, origin: &str) -> Result<RawConfig, ConfigError> {
    let located = |span: Option<std::ops::Range<usize>>, kind| {
        let mut e = ConfigError::new(origin, kind);
        e.location = span.map(|s| Location::of_offset(text, s.start));
        e
    };
    let de = toml::de::Deserializer::parse(text)
        .map_err(|e| located(e.span(), ConfigErrorKind::Syntax(e.message().to_owned())))?;
    serde_path_to_error::deserialize::<_, RawConfig>(de).map_err(|e| {
        // toml::Spanned shows up as a private field in the path: drop it.
        let path = e
            .path()
            .to_string()
            .split('.')
            .filter(|seg| !seg.starts_with("$__"))
            .collect::<Vec<_>>()
            .join(".");
        let inner = e.into_inner();
        let message = with_key_hint(inner.message(), &path);
        let mut err = located(inner.span(), ConfigErrorKind::Invalid(message));
        err.key = (path != "." && !path.is_empty()).then_some(path);
        err
    })
}

/// Rewrites serde's "unknown field" message into one that names the valid
/// keys and suggests the closest (R7.2: a typo must not pass silently).
fn with_key_hint(message: &str, path: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_owned();
    };
    let typo = rest.split('`').next().unwrap_or_default();
    // An unknown key directly under the root or under `profile` is a table
    // name; anything deeper is a profile key.
    let depth = path
        .split('.')
        .filter(|s| !s.is_empty() && *s != "?")
        .count();
    let top_level = depth <= 1 && !path.starts_with("defaults") && !path.starts_with("profile.");
    let valid: &[&str] = if top_level { TOP_KEYS } else { profile_keys() };
    let what = if top_level { "table" } else { "key" };
    let mut out = format!("unknown {what} `{typo}`");
    if let Some(hint) = error::closest(typo, valid.iter().copied()) {
        out.push_str(&format!(" (did you mean `{hint}`?)"));
    }
    if top_level {
        out.push_str("; expected [defaults] or [profile.NAME]");
    } else {
        out.push_str(&format!("; expected one of {}", valid.join(", ")));
    }
    out
}

/// Deserializes a config word: a string, one of `words` (R8.16: whatever
/// the wrong value's type, the error lists the words, where serde's derive
/// said only "wanted string or table" for a number).
fn word<'de, D, T: Copy>(
    d: D,
    words: &'static [(&'static str, T)],
    expected: &'static str,
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Word<T: 'static> {
        words: &'static [(&'static str, T)],
        expected: &'static str,
    }
    impl<T: Copy> serde::de::Visitor<'_> for Word<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.expected)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            self.words
                .iter()
                .find(|(w, _)| *w == v)
                .map(|(_, t)| *t)
                .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
        }
    }
    d.deserialize_any(Word { words, expected })
}

impl<'de> serde::Deserialize<'de> for OnInputWait {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        word(
            d,
            &[("stall", OnInputWait::Stall), ("pause", OnInputWait::Pause)],
            "`stall` or `pause`",
        )
    }
}

impl<'de> serde::Deserialize<'de> for OnLeftover {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        word(
            d,
            &[("kill", OnLeftover::Kill), ("keep", OnLeftover::Keep)],
            "`kill` or `keep`",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // R7.1: the shipped default file sets every key, so it documents them all.
    #[test]
    fn default_file_sets_every_key() {
        let mut raw = parse(DEFAULT_TOML, "default").unwrap();
        raw.defaults
            .resolve(DEFAULT_TOML, "default", "defaults")
            .unwrap();
        for key in profile_keys() {
            assert!(
                raw.defaults.span_of(key).is_some(),
                "{key} is not in stallwarden.default.toml"
            );
        }
        assert!(raw.profile.is_empty());
    }
}
