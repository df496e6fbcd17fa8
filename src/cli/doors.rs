//! The CLI flag door of the four-door table (R10.6): every string spelling
//! of `tests/doors/table.json` for a key that has a flag, through the real
//! argument parser and the same flag handling `run` uses.

#[path = "../../tests/doors/table.rs"]
mod table;

use clap::Parser;
use stallwarden::Profile;

use super::args::{Cli, Command};

#[test]
fn every_spelling_through_the_flags() {
    let (rows, flags) = table::load();
    let mut failures = Vec::new();
    let mut ran = 0;
    for row in rows.iter().filter(|r| r.runs_on("cli")) {
        let (Some(flag), Some(value)) = (flags.get(&row.key), row.value.as_str()) else {
            continue; // no flag for this key, or not a string on a command line
        };
        ran += 1;
        let argv = ["stallwarden", "run", flag, value, "--", "true"];
        let got = match Cli::try_parse_from(argv) {
            Err(e) => Err(e.to_string()),
            Ok(Cli {
                command: Command::Run(args),
                ..
            }) => {
                let mut p = Profile::default();
                super::inputs::apply_flags(&args, &mut p);
                p.validate()
                    .map(|()| p.describe())
                    .map_err(|e| e.to_string())
            }
            Ok(other) => Err(format!("parsed as {other:?}")),
        };
        failures.extend(row.check("cli", flag, &got));
    }
    table::assert_none("cli", ran, &failures);
}
