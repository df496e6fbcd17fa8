// One meaning through every door (R10.6, R3.5, R3.7, R7.2), the Node door:
// every key and every spelling of tests/doors/table.json, the table the Rust
// builder, a real TOML file, the CLI flags and Python run too, through the
// built addon's `start` options (camelCase keys). Each row gives the same
// canonical profile (`describeProfile`, the core's `Profile::describe`) or
// the same error.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Guard, describeProfile } = require('..');

const table = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', '..', 'tests', 'doors', 'table.json'), 'utf8'),
);
const rows = table.rows.filter((r) => !r.only || r.only.includes('node'));
const camel = (key) => key.replace(/-([a-z])/g, (_, c) => c.toUpperCase());

function expectedProfile(key, rendered) {
  return table.default
    .split('\n')
    .filter((line) => line)
    .map((line) => (line.split(' = ')[0] === key ? `${key} = ${rendered}\n` : `${line}\n`))
    .join('');
}

test('R10.6 every spelling of every key means through Node what it means through every door', () => {
  const guard = new Guard({ clock: 'manual' });
  const failures = [];
  for (const row of rows) {
    const key = camel(row.key);
    const options = { [key]: row.value };
    const label = `${key} = ${JSON.stringify(row.value)}`;
    if ('expect' in row) {
      try {
        const got = describeProfile(options);
        const want = expectedProfile(row.key, row.expect);
        if (got !== want) failures.push(`${label}: wanted\n${want}got\n${got}`);
        guard.start('t', options).finish(); // start takes what describeProfile shows
      } catch (e) {
        failures.push(`${label}: wanted the profile, got ${e.message}`);
      }
    } else {
      const want = row.error.replaceAll('{key}', key);
      for (const call of [() => describeProfile(options), () => guard.start('t', options)]) {
        try {
          call();
          failures.push(`${label}: wanted an error containing ${want}, got none`);
        } catch (e) {
          if (!(e instanceof TypeError) || !e.message.includes(want)) {
            failures.push(`${label}: wanted a TypeError containing ${want}, got ${e.name}: ${e.message}`);
          }
        }
      }
    }
  }
  assert.ok(rows.length > 100, `only ${rows.length} rows`);
  assert.deepEqual(failures, []);
});

test('R10.6 the default profile is the table\'s', () => {
  assert.equal(describeProfile(), table.default);
  assert.equal(describeProfile({}), table.default);
});
