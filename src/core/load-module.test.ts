import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "./errors.js";
import { loadModuleExport, parseModuleSpec } from "./load-module.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-load-module-"));
  writeFileSync(join(dir, "plain.mjs"), "export default { kind: 'default' };\nexport const named = (x) => x * 2;\n");
  // TypeScript syntax (a type annotation, an interface) that plain Node cannot load.
  writeFileSync(join(dir, "typed.ts"), "interface Box { n: number }\nexport function double(b: Box): number { return b.n * 2; }\nexport default 'ts-default';\n");
  writeFileSync(join(dir, "common.cjs"), "module.exports = { score: () => 3 };\n");
  writeFileSync(join(dir, "broken.mjs"), "export const x = ;\n");
  writeFileSync(join(dir, "throws.mjs"), "throw new Error('module failed at load');\n");
  writeFileSync(join(dir, "data.json"), "{}\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function error(p: Promise<unknown>): Promise<ArborError> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(ArborError);
  return e as ArborError;
}

describe("loadModuleExport", () => {
  it("splits path#export, the default export without #", () => {
    expect(parseModuleSpec("./a.ts#score")).toEqual({ path: "./a.ts", exportName: "score" });
    expect(parseModuleSpec("./a.ts")).toEqual({ path: "./a.ts", exportName: "default" });
    expect(parseModuleSpec("./a.ts#")).toEqual({ path: "./a.ts", exportName: "default" });
  });

  it("loads JavaScript (ESM and CommonJS) and TypeScript modules, default and named exports", async () => {
    expect(await loadModuleExport(join(dir, "plain.mjs"), "f")).toEqual({ kind: "default" });
    expect(((await loadModuleExport(`${join(dir, "plain.mjs")}#named`, "f")) as (x: number) => number)(21)).toBe(42);
    expect(((await loadModuleExport(`${join(dir, "typed.ts")}#double`, "f")) as (b: { n: number }) => number)({ n: 4 })).toBe(8);
    expect(await loadModuleExport(join(dir, "typed.ts"), "f")).toBe("ts-default");
    expect(((await loadModuleExport(`${join(dir, "common.cjs")}#score`, "f")) as () => number)()).toBe(3);
  });

  it("says which field, file and export is wrong, in one line", async () => {
    expect((await error(loadModuleExport(join(dir, "nope.ts"), "env.module"))).message).toMatch(/^env\.module: module .*nope\.ts not found/);
    expect((await error(loadModuleExport(`${join(dir, "plain.mjs")}#score`, "reward.custom"))).message).toMatch(/^reward\.custom: .*plain\.mjs has no export 'score' \(exports: default, named\)$/);
    expect((await error(loadModuleExport(join(dir, "data.json"), "env.module"))).message).toMatch(/unsupported extension '\.json'/);
    const broken = (await error(loadModuleExport(join(dir, "broken.mjs"), "env.module"))).message;
    expect(broken).toMatch(/^env\.module: cannot load .*broken\.mjs: /);
    expect(broken).not.toContain("\n");
    expect((await error(loadModuleExport(join(dir, "throws.mjs"), "env.module"))).message).toMatch(/cannot load .*throws\.mjs: module failed at load$/);
    expect((await error(loadModuleExport(dir, "env.module"))).message).toMatch(/is not a file$/);
  });
});
