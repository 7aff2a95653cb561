// Custom reward functions from modules: the example's passes the same contract suite as the shipped rewards,
// it composes as a component with its own name and weight, and a bad module, export or value is refused in one
// line naming the reward.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contractGroup, rewardFnContract } from "./reward-fn.contract.js";
import { kebabName, loadCustomRewards } from "./custom-reward.js";
import { createRewardFromConfig } from "./registry.js";
import type { RewardContext, RewardFn } from "./reward-fn.js";

const example = join(import.meta.dirname, "../../examples/custom-env/my-reward.ts");
let dir: string;
let exampleFn: RewardFn;
let asyncFn: RewardFn;
let brevityFn: RewardFn;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-custom-reward-"));
  writeFileSync(join(dir, "r.mjs"), [
    "export async function answerLength(ctx) { return ctx.finalAnswer.length / 100; }",
    "export const rewardFn = { name: 'always-one', compute: () => 1 };",
    "export const notAFunction = 3;",
    "export function bad() { return 'high'; }",
    "export function sneaky() { return Promise.resolve(1); }",
    "export default () => 0.25;",
  ].join("\n"));
  [exampleFn, brevityFn, asyncFn] = (await loadCustomRewards([
    { module: `${example}#toolSuccess`, weight: 1 },
    { module: `${example}#brevity`, weight: 1 },
    { module: `${join(dir, "r.mjs")}#answerLength`, weight: 1 },
  ])).map((w) => w.fn) as [RewardFn, RewardFn, RewardFn];
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("examples/custom-env/my-reward.ts#toolSuccess", () => rewardFnContract("tool-success", () => exampleFn));
describe("examples/custom-env/my-reward.ts#brevity", () => rewardFnContract("brevity", () => brevityFn));
describe("an async custom reward", () => rewardFnContract("answer-length", () => asyncFn));

describe("custom rewards", () => {
  it("name components after the export (kebab-case) or the file, or as configured", async () => {
    expect(kebabName("toolSuccess")).toBe("tool-success");
    expect(kebabName("my_reward.ts")).toBe("my-reward");
    const loaded = await loadCustomRewards([
      { module: join(dir, "r.mjs"), weight: 2 },
      { module: `${join(dir, "r.mjs")}#rewardFn`, weight: 1 },
      { module: `${join(dir, "r.mjs")}#answerLength`, name: "brevity", weight: 0.5 },
    ]);
    expect(loaded.map((w) => [w.fn.name, w.weight, w.fn.isAsync === true])).toEqual([
      ["r", 2, false],
      ["always-one", 1, false],
      ["brevity", 0.5, true],
    ]);
  });

  it("compose with the shipped rewards: each is a stored component, weighted in the total", async () => {
    const custom = await loadCustomRewards([{ module: `${example}#toolSuccess`, weight: 0.5 }]);
    const reward = createRewardFromConfig({ outcome: 1, custom: [{ module: example, weight: 0.5 }] }, { custom });
    expect(reward.names).toEqual(["outcome", "tool-success"]);
    const [first] = await reward.computeGroup(contractGroup().slice(0, 1));
    expect(first!.components["tool-success"]).toBe(1);
    expect(first!.total).toBeCloseTo(first!.components.outcome! + 0.5, 12);
    expect(() => createRewardFromConfig({ outcome: 1, custom: [{ module: example, weight: 1 }] })).toThrow("reward.custom: the custom reward functions were not loaded");
  });

  it("refuse a bad export, name or value in one line naming the reward", async () => {
    const err = (spec: Parameters<typeof loadCustomRewards>[0][number]) => loadCustomRewards([spec]).then(() => "", (e: Error) => e.message);
    expect(await err({ module: `${join(dir, "r.mjs")}#notAFunction`, weight: 1 })).toMatch(/^reward\.custom .*#notAFunction: the export must be a function \(ctx\) => number or a RewardFn \{name, compute\}, got number$/);
    expect(await err({ module: `${join(dir, "r.mjs")}#nope`, weight: 1 })).toMatch(/^reward\.custom: .*r\.mjs has no export 'nope' \(exports: answerLength, bad, default, notAFunction, rewardFn, sneaky\)$/);
    expect(await err({ module: join(dir, "missing.ts"), weight: 1 })).toMatch(/^reward\.custom: module .*missing\.ts not found/);
    expect(await err({ module: `${join(dir, "r.mjs")}#rewardFn`, name: "other", weight: 1 })).toMatch(/name 'other' differs from the RewardFn's own name 'always-one'$/);
    const [bad, sneaky] = (await loadCustomRewards([
      { module: `${join(dir, "r.mjs")}#bad`, weight: 1 },
      { module: `${join(dir, "r.mjs")}#sneaky`, weight: 1 },
    ])).map((w) => w.fn) as [RewardFn, RewardFn];
    const ctx = contractGroup()[0] as RewardContext;
    expect(() => bad.compute(ctx)).toThrow(/^reward\.custom bad \(.*r\.mjs#bad\): returned "high" for program 'p0' \(expected a finite number or \{value, steps\}\)$/);
    expect(() => sneaky.compute(ctx)).toThrow(/returned a promise from a function not declared async for program 'p0'/);
  });
});
