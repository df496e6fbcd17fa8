//! One meaning through every door (R10.6, R3.5, R3.7, R7.2): every key and
//! every spelling of `tests/doors/table.json` through a real config file
//! read by the real loader. The Rust builder's door (`Profile::set`) and
//! the table's coverage of every key are `watchdog-core/tests/doors.rs`,
//! in the crate that owns the meaning. The CLI flags run the same table through the real argument
//! parser (`src/cli/doors.rs`), Node and Python through their built modules
//! (`bindings/node/test/doors.test.js`, `bindings/python/tests/test_doors.py`).

#[path = "doors/table.rs"]
mod table;

use stallwarden::config::Config;

/// The TOML door: a real file in `[defaults]`, the real loader, the
/// effective profile of `[defaults]`.
#[test]
fn every_spelling_through_a_real_config_file() {
    let (rows, _) = table::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stallwarden.toml");
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
