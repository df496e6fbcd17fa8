//! Profile option values as users write them (R10.6): [`Limit`], a
//! budget's value with its one `FromStr` (`"off"`, `"0"`, humantime) and
//! its reading of milliseconds, and [`OptionValue`], whatever a door hands
//! to [`Profile::set`](crate::Profile::set) (a TOML value, a flag's text, a
//! JS value, a Python object).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::vocab::duration::{duration_from_millis, number, parse_duration, DurationError};

/// A budget's value: off, or a duration (R7.1, R10.6).
///
/// Its one [`FromStr`] takes `"off"`, `"0"`, and humantime strings
/// (`"90s"`, `"1h 30m"`, `"500ms"`), at most 100 years (R8.12);
/// [`Limit::from_millis`] takes a number of milliseconds. What a zero means
/// is the key's business, not the value's: `heartbeat-interval = 0` is off
/// (R3.7), `grace-period = 0` kills at once (R3.5), `idle = 0` is refused
/// (R7.2). [`Profile::set`](crate::Profile::set) applies those rules.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Limit, Profile};
///
/// assert_eq!("off".parse::<Limit>(), Ok(Limit::Off));
/// assert_eq!("1m 30s".parse::<Limit>(), Ok(Limit::After(Duration::from_secs(90))));
/// assert_eq!("0".parse::<Limit>(), Ok(Limit::After(Duration::ZERO)));
/// assert_eq!(Limit::from_millis(1500.0), Ok(Limit::After(Duration::from_millis(1500))));
/// assert!("soon".parse::<Limit>().is_err());
/// // A builder method takes a Limit, a Duration or an Option<Duration>.
/// let p = Profile::default().idle(Limit::Off).deadline(Duration::from_secs(60));
/// assert_eq!(p.idle, None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The budget is off (`"off"`).
    Off,
    /// The budget is this long.
    After(Duration),
}

impl Limit {
    /// Returns the duration, `None` when off.
    pub const fn duration(self) -> Option<Duration> {
        match self {
            Limit::Off => None,
            Limit::After(d) => Some(d),
        }
    }

    /// Reads a number of milliseconds (Node, Python): finite, not
    /// negative, at most 100 years (R8.12).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::Limit;
    /// assert!(Limit::from_millis(-1.0).is_err());
    /// assert!(Limit::from_millis(f64::NAN).is_err());
    /// ```
    pub fn from_millis(ms: f64) -> Result<Limit, DurationError> {
        duration_from_millis(ms).map(Limit::After)
    }
}

impl FromStr for Limit {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Limit, DurationError> {
        match s.trim() {
            "off" => Ok(Limit::Off),
            // A bare zero is zero in every unit; any other bare number needs
            // one (humantime says so).
            "0" => Ok(Limit::After(Duration::ZERO)),
            _ => parse_duration(s).map(Limit::After),
        }
    }
}

impl fmt::Display for Limit {
    /// `off`, or the duration in humantime form (`1m 30s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Off => f.write_str("off"),
            Limit::After(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

impl From<Duration> for Limit {
    fn from(d: Duration) -> Limit {
        Limit::After(d)
    }
}

impl From<Option<Duration>> for Limit {
    fn from(d: Option<Duration>) -> Limit {
        d.map_or(Limit::Off, Limit::After)
    }
}

/// A value for [`Profile::set`](crate::Profile::set) as a door received it: TOML's, a CLI
/// flag's, a JS value, a Python object.
///
/// Text is parsed with [`Limit`]'s `FromStr` for durations; a number is
/// milliseconds for a duration and a count for `terminate-after`; `Null`
/// (JS `null`) and `Bool(false)` also turn off a budget that can be off.
///
/// # Examples
///
/// ```
/// use watchdog_core::OptionValue;
/// assert_eq!(OptionValue::from("90s").to_string(), "\"90s\"");
/// assert_eq!(OptionValue::from(1500).to_string(), "1500");
/// let kinds = OptionValue::from(vec!["output", "cpu"]);
/// assert_eq!(kinds.to_string(), "[\"output\", \"cpu\"]");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// JS `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction (or NaN, or an infinity).
    Float(f64),
    /// A string.
    Text(String),
    /// A list (`renewed-by`).
    List(Vec<OptionValue>),
}

impl fmt::Display for OptionValue {
    /// The value as a person would write it (JSON-like), for errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Null => f.write_str("null"),
            OptionValue::Bool(b) => write!(f, "{b}"),
            OptionValue::Int(n) => write!(f, "{n}"),
            OptionValue::Float(x) => f.write_str(&number(*x)),
            OptionValue::Text(s) => write!(f, "{s:?}"),
            OptionValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl From<&str> for OptionValue {
    fn from(s: &str) -> Self {
        OptionValue::Text(s.to_owned())
    }
}

impl From<String> for OptionValue {
    fn from(s: String) -> Self {
        OptionValue::Text(s)
    }
}

impl From<i64> for OptionValue {
    fn from(n: i64) -> Self {
        OptionValue::Int(n)
    }
}

impl From<i32> for OptionValue {
    fn from(n: i32) -> Self {
        OptionValue::Int(n.into())
    }
}

impl From<u32> for OptionValue {
    fn from(n: u32) -> Self {
        OptionValue::Int(n.into())
    }
}

impl From<f64> for OptionValue {
    fn from(x: f64) -> Self {
        OptionValue::Float(x)
    }
}

impl From<bool> for OptionValue {
    fn from(b: bool) -> Self {
        OptionValue::Bool(b)
    }
}

impl<T: Into<OptionValue>> From<Vec<T>> for OptionValue {
    fn from(items: Vec<T>) -> Self {
        OptionValue::List(items.into_iter().map(Into::into).collect())
    }
}
