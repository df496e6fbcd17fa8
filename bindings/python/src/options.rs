//! Python values into engine values: profile options through the core's
//! one entry ([`watchdog_core::Profile::set`], R10.6), so a key means in
//! Python what it means in TOML, the CLI flags and Node, and fails with the
//! same message; and the few durations that are not profile options
//! (`advance`, a `flush` timeout, `sample_every`).

use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use watchdog_core::{GuardError, Limit, OptionSpec, OptionValue, Profile};

use crate::sink::Shared;

/// Turns a Python value into the value the core's option entry takes: a
/// number is milliseconds for a duration, a `datetime.timedelta` its
/// milliseconds, `False` off for a budget that can be off.
fn option_value(v: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    Ok(if v.is_instance_of::<PyBool>() {
        OptionValue::Bool(v.extract()?)
    } else if v.is_instance_of::<PyInt>() {
        match v.extract::<i64>() {
            Ok(n) => OptionValue::Int(n),
            Err(_) => OptionValue::Float(v.extract()?),
        }
    } else if v.is_instance_of::<PyFloat>() {
        OptionValue::Float(v.extract()?)
    } else if let Ok(s) = v.cast::<PyString>() {
        OptionValue::Text(s.to_cow()?.into_owned())
    } else if let Ok(list) = v.cast::<PyList>() {
        OptionValue::List(
            list.iter()
                .map(|i| option_value(&i))
                .collect::<PyResult<_>>()?,
        )
    } else if let Ok(tuple) = v.cast::<PyTuple>() {
        OptionValue::List(
            tuple
                .iter()
                .map(|i| option_value(&i))
                .collect::<PyResult<_>>()?,
        )
    } else if v.hasattr("total_seconds")? {
        let secs: f64 = v.call_method0("total_seconds")?.extract()?;
        OptionValue::Float(secs * 1000.0)
    } else {
        OptionValue::Text(repr(v))
    })
}

/// Builds a profile from keyword options over the defaults (R10.6): an
/// unknown key is a `TypeError` (as for any unexpected keyword), a bad
/// value a `ValueError` with the core's message and the value as given.
pub(crate) fn profile(options: Option<&Bound<'_, PyDict>>) -> PyResult<Profile> {
    let mut p = Profile::default();
    for (key, v) in options.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        if v.is_none() {
            continue; // the keyword's default: keep the key's default
        }
        let value = option_value(&v)?;
        p.set(&key, value).map_err(|e| {
            let msg = format!("{e}; got {}", repr(&v));
            if OptionSpec::find(&key).is_none() {
                PyTypeError::new_err(msg)
            } else {
                PyValueError::new_err(msg)
            }
        })?;
    }
    Ok(p)
}

/// Returns the profile the keyword options give, as `Guard.start` would
/// use it, in the core's canonical form (R10.6): one `key = value` line per
/// key, the same text as Rust's `Profile::describe` and Node's
/// `describeProfile`.
///
/// # Examples
///
/// ```python
/// import stallwarden
/// stallwarden.describe_profile(idle="off").splitlines()[0]  # 'idle = "off"'
/// ```
#[pyfunction]
#[pyo3(signature = (**options))]
pub(crate) fn describe_profile(options: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
    let p = profile(options)?;
    p.validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(p.describe())
}

/// Reads a duration that is not a profile option: a humantime string
/// ("90s", "1h 30m"), "off" (`None`), a number of milliseconds or a
/// `datetime.timedelta`, through the core's [`Limit`].
pub(crate) fn duration_or_off(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<Duration>> {
    let bad = || {
        PyValueError::new_err(format!(
            "{key}: expected a duration (a string like \"90s\" or \"1h 30m\", \"off\", \
             a number of milliseconds, or a datetime.timedelta), got {}",
            repr(v)
        ))
    };
    // The core's reason (out of range, negative), then the value as given.
    let because = |e: watchdog_core::DurationError| {
        PyValueError::new_err(format!("{key}: {e}; got {}", repr(v)))
    };
    if v.is_instance_of::<PyBool>() {
        return Err(bad());
    }
    let limit = if let Ok(s) = v.cast::<PyString>() {
        s.to_cow()?.parse::<Limit>().map_err(because)?
    } else if let Ok(ms) = v.extract::<f64>() {
        Limit::from_millis(ms).map_err(because)?
    } else if v.hasattr("total_seconds")? {
        let secs: f64 = v
            .call_method0("total_seconds")?
            .extract()
            .map_err(|_| bad())?;
        Limit::from_millis(secs * 1000.0).map_err(because)?
    } else {
        return Err(bad());
    };
    Ok(limit.duration())
}

pub(crate) fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr()
        .map_or_else(|_| "<unprintable>".to_owned(), |r| r.to_string())
}

pub(crate) fn guard_error(e: GuardError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

pub(crate) fn to_py<T: serde::Serialize>(
    py: Python<'_>,
    shared: &Shared,
    v: &T,
) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(shared.loads.bind(py).call1((json,))?.unbind())
}
