//! One meaning through every door (R10.6, R3.5, R3.7, R7.2): every key and
//! every spelling of `tests/doors/table.json` through the Rust builder's
//! one entry (`Profile::set`) and through a real config file read by the
//! real loader. The CLI flags run the same table through the real argument
//! parser (`src/cli/doors.rs`), Node and Python through their built modules
//! (`bindings/node/test/doors.test.js`, `bindings/python/tests/test_doors.py`).

#[path = "doors/table.rs"]
mod table;

use stallguard::config::Config;
use watchdog_core::Profile;

/// The Rust door: `Profile::set` with the kebab-case key, then the check
/// `Guard::start` makes.
#[test]
fn every_spelling_through_the_rust_builder() {
    let (rows, _) = table::load();
    let mut failures = Vec::new();
    let mut ran = 0;
    for row in rows.iter().filter(|r| r.runs_on("rust")) {
        ran += 1;
        let mut p = Profile::default();
        let got = p
            .set(&row.key, table::option_value(&row.value))
            .and_then(|()| p.validate())
            .map(|()| p.describe())
            .map_err(|e| e.to_string());
        failures.extend(row.check("rust", &row.key, &got));
    }
    table::assert_none("rust", ran, &failures);
}

/// The TOML door: a real file in `[defaults]`, the real loader, the
/// effective profile of `[defaults]`.
#[test]
fn every_spelling_through_a_real_config_file() {
    let (rows, _) = table::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stallguard.toml");
    let mut failures = Vec::new();
    let mut ran = 0;
    for row in rows.iter().filter(|r| r.runs_on("toml")) {
        // TOML has no null.
        let Ok(value) = serde_json::from_value::<toml::Value>(row.value.clone()) else {
            continue;
        };
        ran += 1;
        std::fs::write(&path, format!("[defaults]\n{} = {value}\n", row.key)).unwrap();
        let got = Config::load(&path)
            .and_then(|c| c.profile(None))
            .map(|p| p.describe())
            .map_err(|e| e.to_string());
        let key = format!("defaults.{}", row.key);
        failures.extend(row.check("toml", &key, &got));
    }
    table::assert_none("toml", ran, &failures);
}

/// The table covers every key of the core's table, with an accepted and a
/// refused spelling each.
#[test]
fn the_table_covers_every_key() {
    let (rows, _) = table::load();
    for option in &watchdog_core::OPTIONS {
        let of_key: Vec<_> = rows.iter().filter(|r| r.key == option.name()).collect();
        for door in ["rust", "toml", "node", "python"] {
            let accepted = of_key
                .iter()
                .filter(|r| r.runs_on(door))
                .any(|r| matches!(r.want(door), table::Want::Profile(_)));
            let refused = of_key
                .iter()
                .filter(|r| r.runs_on(door))
                .any(|r| matches!(r.want(door), table::Want::Error(_)));
            assert!(
                accepted && refused,
                "{}: {door} lacks an accepted or a refused row",
                option.name()
            );
        }
    }
}
