"""One meaning through every door (R10.6, R3.5, R3.7, R7.2), the Python door:
every key and every spelling of tests/doors/table.json, the table the Rust
builder, a real TOML file, the CLI flags and Node run too, through the built
module's keyword options. Each row gives the same canonical profile
(`describe_profile`, the core's `Profile::describe`) or the same error."""

import json
import pathlib

import pytest

import stallwarden as sg

TABLE = json.loads(
    (pathlib.Path(__file__).resolve().parents[3] / "tests" / "doors" / "table.json").read_text()
)
ROWS = [r for r in TABLE["rows"] if "python" in r.get("only", ["python"])]


def expected_profile(key, rendered):
    lines = TABLE["default"].splitlines()
    return "".join(
        f"{key} = {rendered}\n" if line.split(" = ")[0] == key else f"{line}\n" for line in lines
    )


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['key']}={r['value']!r}" for r in ROWS])
def test_every_spelling_means_what_it_means_from_every_door(manual, row):
    guard, _ = manual
    key = row["key"].replace("-", "_")
    options = {key: row["value"]}
    if "expect" in row:
        assert sg.describe_profile(**options) == expected_profile(row["key"], row["expect"])
        guard.start("t", **options).finish()  # start takes what describe_profile shows
    else:
        want = row["error"].replace("{key}", key)
        for call in (lambda: sg.describe_profile(**options), lambda: guard.start("t", **options)):
            with pytest.raises((ValueError, TypeError)) as e:
                call()
            assert want in str(e.value)


def test_the_default_profile_is_the_tables():
    assert sg.describe_profile() == TABLE["default"]


def test_none_keeps_the_default():
    # A keyword left at None is not given (Python's own default), not "off".
    assert sg.describe_profile(idle=None, grace_period=None) == TABLE["default"]
