//! The four-door table of R10.6, read from `tests/doors/table.json`: each
//! row sets one profile option by one spelling and says which profile (in
//! the core's canonical rendering, `Profile::describe`) or which error every
//! door must give. Shared by `watchdog-core/tests/doors.rs` (the Rust
//! builder), `tests/doors.rs` (TOML) and the CLI's parser test (`src/cli/doors.rs`); the pytest and the
//! `node --test` suite read the same file.

// Each includer uses part of it (the CLI door has no use for option_value).
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde_json::Value;
use watchdog_core::{OptionValue, Profile};

/// What a door must give for a row.
#[derive(Clone, Debug)]
pub enum Want {
    /// This whole canonical profile.
    Profile(String),
    /// An error containing this text, `{key}` standing for the door's key.
    Error(String),
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The kebab-case key.
    pub key: String,
    /// The value, as JSON.
    pub value: Value,
    want: Want,
    toml: Option<Want>,
    only: Option<Vec<String>>,
}

impl Row {
    /// Returns whether `door` runs this row.
    pub fn runs_on(&self, door: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|d| d == door))
    }

    /// Returns what `door` must give.
    pub fn want(&self, door: &str) -> &Want {
        match (&self.toml, door) {
            (Some(w), "toml") => w,
            _ => &self.want,
        }
    }

    /// Checks what `door` gave, where the door spells the key `door_key`;
    /// returns the mismatch, if any.
    pub fn check(
        &self,
        door: &str,
        door_key: &str,
        got: &Result<String, String>,
    ) -> Option<String> {
        let label = format!("{door}: {} = {}", self.key, self.value);
        match (self.want(door), got) {
            (Want::Profile(want), Ok(got)) if want == got => None,
            (Want::Error(want), Err(got)) if got.contains(&want.replace("{key}", door_key)) => None,
            (Want::Profile(want), got) => {
                Some(format!("{label}: wanted the profile\n{want}got {got:?}"))
            }
            (Want::Error(want), got) => Some(format!(
                "{label}: wanted an error containing {:?}, got {got:?}",
                want.replace("{key}", door_key)
            )),
        }
    }
}

/// The table's default profile with `key`'s line set to `rendered`.
fn profile_with(default: &str, key: &str, rendered: &str) -> String {
    default
        .lines()
        .map(|line| match line.split_once(" = ") {
            Some((k, _)) if k == key => format!("{k} = {rendered}\n"),
            _ => format!("{line}\n"),
        })
        .collect()
}

fn want(default: &str, key: &str, v: &Value) -> Want {
    match (v.get("expect"), v.get("error")) {
        (Some(Value::String(e)), _) => Want::Profile(profile_with(default, key, e)),
        (_, Some(Value::String(e))) => Want::Error(e.clone()),
        _ => panic!("table row without expect or error: {v}"),
    }
}

/// The table: its rows and the CLI flag of each key that has one.
pub fn load() -> (Vec<Row>, BTreeMap<String, String>) {
    // The workspace's root holds it; `watchdog-core`'s own tests read it too.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("tests/doors/table.json"))
        .find(|p| p.exists())
        .expect("tests/doors/table.json in the workspace");
    let text = std::fs::read_to_string(path).expect("tests/doors/table.json");
    let doc: Value = serde_json::from_str(&text).expect("table.json is JSON");
    let default = doc["default"].as_str().expect("default");
    // Every door compares against the table's default: it must be the core's.
    assert_eq!(
        default,
        Profile::default().describe(),
        "table.json's default"
    );
    let flags = doc["cli_flags"]
        .as_object()
        .expect("cli_flags")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a flag").to_owned()))
        .collect();
    let rows = doc["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let key = r["key"].as_str().expect("key").to_owned();
            Row {
                want: want(default, &key, r),
                toml: r.get("toml").map(|t| want(default, &key, t)),
                only: r
                    .get("only")
                    .map(|o| serde_json::from_value(o.clone()).expect("only: a list of doors")),
                value: r["value"].clone(),
                key,
            }
        })
        .collect();
    (rows, flags)
}

/// A JSON value as a door hands it to the core: the Rust builder's view of
/// what Node passes.
pub fn option_value(v: &Value) -> OptionValue {
    match v {
        Value::Null => OptionValue::Null,
        Value::Bool(b) => OptionValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => OptionValue::Int(i),
            None => OptionValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => OptionValue::Text(s.clone()),
        Value::Array(items) => OptionValue::List(items.iter().map(option_value).collect()),
        Value::Object(_) => OptionValue::Text(v.to_string()),
    }
}

/// Asserts that no row failed, listing every failure.
pub fn assert_none(door: &str, ran: usize, failures: &[String]) {
    assert!(ran > 0, "{door}: no row ran");
    assert!(
        failures.is_empty(),
        "{} of {ran} rows failed through the {door} door:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
