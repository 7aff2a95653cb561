// The layer rules of .dependency-cruiser.cjs (run by `npm run lint`) fire: a small tree with one violation of
// each kind is checked with the repository's own config, and a clean tree passes.
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");
const depcruise = join(repo, "node_modules/.bin/depcruise");
const dirs: string[] = [];

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/** Write `files` into a fresh project folder beside the repository's tsconfig and cruise it. */
async function cruise(files: Record<string, string>): Promise<{ code: number; violations: Violation[] }> {
  const dir = mkdtempSync(join(tmpdir(), "arbor-layers-"));
  dirs.push(dir);
  copyFileSync(join(repo, "tsconfig.json"), join(dir, "tsconfig.json"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const cruiseAs = async (outputType: string): Promise<{ code: number; stdout: string }> => {
    // The same command as `npm run lint` (package.json), with the report format chosen here.
    const args = ["src", "--config", join(repo, ".dependency-cruiser.cjs"), "--output-type", outputType];
    try {
      return { code: 0, ...(await run(depcruise, args, { cwd: dir })) };
    } catch (error) {
      return error as { code: number; stdout: string };
    }
  };
  // The json report always exits 0; the err report (what lint prints) exits with the number of errors.
  const [json, err] = await Promise.all([cruiseAs("json"), cruiseAs("err")]);
  return { code: err.code, violations: JSON.parse(json.stdout).summary.violations };
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("layer rules", () => {
  it("flag an upward import, a peer import, a cycle, production code using test support, and code only tests reach", async () => {
    const { code, violations } = await cruise({
      "src/cli/main.ts": [
        'import { a } from "../core/a.js";',
        'import { e } from "../engine/e.js";',
        'import { r1 } from "../rollout/r1.js";',
        'import { r3 } from "../rollout/r3.js";',
        "export const main = [a, e, r1, r3];",
      ].join("\n"),
      "src/core/a.ts": 'import { g } from "../gateway/g.js";\nexport const a = g;\n',
      "src/gateway/g.ts": "export const g = 1;\n",
      "src/engine/e.ts": 'import { b } from "../backends/b.js";\nexport const e = b;\n',
      "src/backends/b.ts": "export const b = 2;\n",
      "src/rollout/r1.ts": 'import { r2 } from "./r2.js";\nexport const r1 = () => r2();\n',
      "src/rollout/r2.ts": 'import { r1 } from "./r1.js";\nexport const r2 = (): unknown => r1;\n',
      "src/rollout/r3.ts": 'import { helper } from "../testing/helper.js";\nexport const r3 = helper;\n',
      "src/rollout/r3.test.ts": 'import { main } from "../cli/main.js";\nimport { helper } from "../testing/helper.js";\nexport const t = [main, helper];\n',
      "src/testing/helper.ts": "export const helper = 3;\n",
      "src/sim/orphan.ts": "export const orphan = 4;\n",
    });
    expect(code).not.toBe(0);
    const seen = violations.map((v) => `${v.rule.name} ${v.from} -> ${v.to}`).sort();
    expect(seen).toEqual(
      [
        "layer-core src/core/a.ts -> src/gateway/g.ts",
        "layer-engine src/engine/e.ts -> src/backends/b.ts",
        "no-circular src/rollout/r1.ts -> src/rollout/r2.ts",
        "no-production-code-only-for-tests src/sim/orphan.ts -> src/sim/orphan.ts",
        "testing-only-from-tests src/rollout/r3.ts -> src/testing/helper.ts",
      ].sort(),
    );
  }, 120_000);

  it("pass a tree that keeps the order", async () => {
    const { code, violations } = await cruise({
      "src/cli/main.ts": 'import { loop } from "../loop/loop.js";\nexport const main = loop;\n',
      "src/loop/loop.ts": 'import { a } from "../core/a.js";\nimport { g } from "../gateway/g.js";\nexport const loop = a + g;\n',
      "src/gateway/g.ts": 'import { a } from "../core/a.js";\nexport const g = a;\n',
      "src/core/a.ts": "export const a = 1;\n",
      "src/gateway/g.test.ts": 'import { main } from "../cli/main.js";\nexport const t = main;\n',
    });
    expect(violations).toEqual([]);
    expect(code).toBe(0);
  }, 120_000);
});
