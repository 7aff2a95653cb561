// Writes the Python client's fixture batches (src/testing/python-fixtures.ts) into a directory, for running
// python/tests on their own: `npx tsx scripts/python-fixtures.ts <dir>`.
import { mkdirSync } from "node:fs";
import { writePythonFixtures } from "../src/testing/python-fixtures.js";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: tsx scripts/python-fixtures.ts <dir>");
  process.exit(2);
}
mkdirSync(dir, { recursive: true });
console.log(writePythonFixtures(dir).join("\n"));
