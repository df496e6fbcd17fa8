//! R10.6: one meaning through every door. The Rust builder's door, here in
//! the core that owns the meaning (so a mutation run of this crate sees
//! it): every spelling of the workspace's `tests/doors/table.json` through
//! `Profile::set`, compared in the core's canonical rendering. The TOML,
//! flag, Node and Python doors read the same table (`tests/doors.rs`,
//! `src/cli/doors.rs`, the bindings' suites).

#[path = "../../tests/doors/table.rs"]
mod table;

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
