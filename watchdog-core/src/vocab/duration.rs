//! Durations as users write them, parsed and bounded in one place (R10.6,
//! R8.12): TOML keys, CLI flags, the Rust builder, Node, Python and
//! `EXTEND_TIMEOUT_USEC` all go through [`parse_duration`] or
//! [`check_duration`], so "100 years" is the same limit through every door
//! and no value can overflow an `Instant` or panic on the way.

use std::fmt;
use std::time::Duration;

/// The longest duration any option accepts: 100 years of 365.25 days, as
/// humantime counts a year (`"100y"` is the largest value accepted).
///
/// Far longer than any watchdog budget needs, far shorter than what would
/// overflow a monotonic `Instant` (R8.12).
///
/// # Examples
///
/// ```
/// use watchdog_core::MAX_DURATION;
/// assert_eq!(MAX_DURATION.as_secs(), 100 * 31_557_600);
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// The range every duration must lie in, as stated in errors.
pub const DURATION_RANGE: &str = "0s..=100years";

/// A duration that is not one: unparsable, or beyond [`MAX_DURATION`].
///
/// # Examples
///
/// ```
/// use watchdog_core::parse_duration;
/// let err = parse_duration("9223372036854775807s").unwrap_err();
/// assert!(err.to_string().contains("0s..=100years"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// The text is not a humantime duration.
    Invalid {
        /// The text as written.
        text: String,
        /// Why humantime refused it.
        why: String,
    },
    /// The duration is longer than [`MAX_DURATION`].
    TooLong {
        /// The value as written (text, or a rendering of the number given).
        text: String,
    },
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid { text, why } => {
                write!(f, "invalid duration \"{text}\" ({why})")
            }
            DurationError::TooLong { text } => write!(
                f,
                "duration \"{text}\" is out of range: at most 100 years ({DURATION_RANGE})"
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a humantime duration (`"90s"`, `"1h 30m"`, `"500ms"`), refusing
/// anything beyond [`MAX_DURATION`] with the range (R8.12).
///
/// `"off"` is not a duration: callers that allow it check for it first.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::parse_duration;
/// assert_eq!(parse_duration(" 1h 30m "), Ok(Duration::from_secs(5400)));
/// assert!(parse_duration("100y").is_ok());
/// assert!(parse_duration("101y").unwrap_err().to_string().contains("at most 100 years"));
/// assert_eq!(
///     parse_duration("-1s").unwrap_err().to_string(),
///     "invalid duration \"-1s\" (a duration cannot be negative)"
/// );
/// // Digits apart with no unit between them are a mistake, not "1m 30s".
/// assert!(parse_duration("1 30m").unwrap_err().to_string().contains("its own unit"));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    if text.trim_start().starts_with('-') {
        return Err(DurationError::Invalid {
            text: text.to_owned(),
            why: "a duration cannot be negative".into(),
        });
    }
    // R8.16: humantime reads "1 2 3s" as 2m 3s and "1 30m" as 130
    // minutes; a number followed by spaces and another number lacks its
    // unit.
    if digits_apart(text) {
        return Err(DurationError::Invalid {
            text: text.to_owned(),
            why: "each number needs its own unit, as in \"1h 30m\"".into(),
        });
    }
    let d = humantime::parse_duration(text.trim()).map_err(|e| match e {
        // humantime overflows only on values far past the limit.
        humantime::DurationError::NumberOverflow => DurationError::TooLong {
            text: text.to_owned(),
        },
        e => DurationError::Invalid {
            text: text.to_owned(),
            why: e.to_string(),
        },
    })?;
    check_duration(d).map_err(|_| DurationError::TooLong {
        text: text.to_owned(),
    })
}

/// Whether a digit is followed, past whitespace only, by another digit.
fn digits_apart(text: &str) -> bool {
    let mut after_digit_space = false;
    let mut last_digit = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if after_digit_space {
                return true;
            }
            last_digit = true;
        } else if c.is_whitespace() {
            after_digit_space |= last_digit;
            last_digit = false;
        } else {
            after_digit_space = false;
            last_digit = false;
        }
    }
    false
}

/// Checks a duration given as a number (milliseconds from Node or Python,
/// microseconds from `EXTEND_TIMEOUT_USEC`, a builder call) against
/// [`MAX_DURATION`] (R8.12, R10.6).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{check_duration, MAX_DURATION};
/// assert_eq!(check_duration(MAX_DURATION), Ok(MAX_DURATION));
/// assert!(check_duration(Duration::MAX).is_err());
/// ```
pub fn check_duration(d: Duration) -> Result<Duration, DurationError> {
    if d > MAX_DURATION {
        return Err(DurationError::TooLong {
            text: humantime::format_duration(d).to_string(),
        });
    }
    Ok(d)
}

/// Checks a number of milliseconds (Node, Python) and turns it into a
/// duration: finite, not negative, at most [`MAX_DURATION`] (R10.6).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::duration_from_millis;
/// assert_eq!(duration_from_millis(1500.0), Ok(Duration::from_millis(1500)));
/// assert!(duration_from_millis(-1.0).is_err());
/// assert!(duration_from_millis(f64::INFINITY).is_err());
/// assert!(duration_from_millis(1e300).unwrap_err().to_string().contains("100 years"));
/// ```
pub fn duration_from_millis(ms: f64) -> Result<Duration, DurationError> {
    let max_ms = MAX_DURATION.as_secs_f64() * 1000.0;
    if ms.is_nan() || ms < 0.0 {
        return Err(DurationError::Invalid {
            text: number(ms),
            why: "expected a non-negative number of milliseconds".into(),
        });
    }
    if ms > max_ms {
        return Err(DurationError::TooLong {
            text: format!("{}ms", number(ms)),
        });
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// Renders a number as a person would write it: `1500`, `1.5`, `1e300`
/// (never three hundred digits).
pub(crate) fn number(x: f64) -> String {
    if x.is_finite() && x != 0.0 && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Returns the instant `d` from now, saturating at [`MAX_DURATION`] from
/// now: every wait bounded by a caller's duration is computed with it, so
/// no value overflows an `Instant` or panics (R8.12).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use watchdog_core::{instant_after, MAX_DURATION};
/// let t = instant_after(Duration::MAX); // no panic
/// assert!(t > Instant::now() + Duration::from_secs(3600));
/// assert!(t <= Instant::now() + MAX_DURATION);
/// ```
pub fn instant_after(d: Duration) -> std::time::Instant {
    after(std::time::Instant::now(), d)
}

/// `now + d`, capped: [`instant_after`] from a given instant.
fn after(now: std::time::Instant, d: Duration) -> std::time::Instant {
    now.checked_add(d.min(MAX_DURATION))
        .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365)))
        .unwrap_or(now)
}

/// Serializes a duration as whole milliseconds (`*_ms` fields of events
/// and snapshots).
pub(crate) mod ms {
    use std::time::Duration;
    pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// Serializes an optional duration as whole milliseconds, or `null`.
pub(crate) mod opt_ms {
    use std::time::Duration;
    pub(crate) fn serialize<S: serde::Serializer>(
        d: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::ms::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    // R8.16: digits separated by spaces are an error, wherever they are;
    // a number and its unit may still stand apart.
    #[test]
    fn digits_separated_by_spaces_are_refused() {
        for bad in ["1 2 3s", "1 30m", "1h 2 3s", " 5 \t 5s"] {
            assert!(digits_apart(bad), "{bad}");
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        for good in ["1h 30m", "90s", "1 h", "1.5h", "2m 3s", "3"] {
            assert!(!digits_apart(good), "{good}");
        }
        assert_eq!(parse_duration("1 h"), Ok(Duration::from_secs(3600)));
    }

    use super::*;

    // R8.12: the values that overflowed an Instant are refused with the range.
    #[test]
    fn huge_values_are_refused_never_overflowing() {
        for text in [
            "9223372036854775807s",
            "18446744073709551615s",
            "101years",
            "1000000000000d",
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(
                matches!(err, DurationError::TooLong { .. }),
                "{text}: {err}"
            );
            assert!(err.to_string().contains(DURATION_RANGE), "{err}");
        }
        assert_eq!(parse_duration("100years"), Ok(MAX_DURATION));
        let d = parse_duration("100y").unwrap();
        assert!(std::time::Instant::now().checked_add(d).is_some());
    }

    // R8.12: near the end of what an Instant holds, a deadline that no
    // longer fits is a year away, then the instant itself; never a panic.
    #[test]
    fn a_deadline_past_the_last_instant_falls_back_to_a_year_then_to_now() {
        use std::time::Instant;
        let now = Instant::now();
        // The longest duration `now` still takes, found by bisection.
        let (mut fits, mut too_far) = (0u64, u64::MAX);
        while too_far - fits > 1 {
            let mid = fits + (too_far - fits) / 2;
            match now.checked_add(Duration::from_secs(mid)) {
                Some(_) => fits = mid,
                None => too_far = mid,
            }
        }
        let year = Duration::from_secs(86_400 * 365);
        let late = now + Duration::from_secs(fits) - 50 * year;
        assert!(late.checked_add(MAX_DURATION).is_none());
        assert_eq!(after(late, Duration::MAX), late + year);
        assert_eq!(
            after(late, Duration::from_secs(7)),
            late + Duration::from_secs(7)
        );
        let last = now + Duration::from_secs(fits);
        assert_eq!(after(last, Duration::MAX), last);
    }
}
