import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "../core/zod.js";
import type { AgentDefinition } from "./define-agent.js";
import { checkAgentDefinition, loadModuleAgent } from "./module-agent.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-module-agent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base: AgentDefinition = {
  name: "tool-agent",
  tools: [{ name: "calc", description: "calculator", input: z.string(), run: async (x: string) => x }],
  toolMode: "markup",
  limits: { maxTurns: 3, maxTokensPerCall: 32, maxTotalTokens: 96 },
};

function module(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("agent.module", () => {
  it("examples/custom-env/my-agent.ts: a factory given Arbor's definition, returning the changed one", async () => {
    const def = await loadModuleAgent(resolve(import.meta.dirname, "../../examples/custom-env/my-agent.ts"), base);
    expect(def.name).toBe("shop-agent");
    expect(def.tools.map((t) => t.name)).toEqual(["calc"]);
    expect(def.limits).toEqual({ ...base.limits, maxParallelTools: 1 });
    expect(await def.onAnswer?.("it is 12", 1)).toBe("Give the final answer as: Answer: <number>");
    expect(await def.onAnswer?.("Answer: 12", 1)).toBeUndefined();
    expect(await def.onAnswer?.("it is 12", 2)).toBeUndefined();
  });

  it("a definition object as a named export works too", async () => {
    const path = module("named.mjs", `export const careful = { name: "careful", tools: [], toolMode: "markup", limits: { maxTurns: 1, maxTokensPerCall: 8, maxTotalTokens: 8 } };`);
    expect((await loadModuleAgent(`${path}#careful`, base)).name).toBe("careful");
  });

  it("refuses what is not an agent, naming the member and the module", async () => {
    const notObject = module("number.mjs", "export default () => 42;");
    await expect(loadModuleAgent(notObject, base)).rejects.toThrow(`agent.module ${notObject}: not an agent definition: got number`);
    const noTools = module("no-tools.mjs", "export default (b) => ({ ...b, tools: undefined });");
    await expect(loadModuleAgent(noTools, base)).rejects.toThrow("not an agent definition: 'tools' must be an array (got undefined)");
    const throws = module("throws.mjs", "export default () => { throw new Error('no config'); };");
    await expect(loadModuleAgent(throws, base)).rejects.toThrow(`agent.module ${throws}: the factory threw: no config`);
    await expect(loadModuleAgent(join(dir, "missing.ts"), base)).rejects.toThrow(/agent\.module: module .*missing\.ts not found/);
    expect(() => checkAgentDefinition({ ...base, tools: [base.tools[0], base.tools[0]] }, "m.ts")).toThrow("agent.module m.ts: not an agent definition: defineAgent tool-agent: two tools named 'calc'");
    expect(() => checkAgentDefinition({ ...base, limits: { ...base.limits, maxTurns: 0 } }, "m.ts")).toThrow(/limits\.maxTurns must be a positive integer, got 0/);
    expect(() => checkAgentDefinition({ ...base, onAnswer: "yes" }, "m.ts")).toThrow("'onAnswer' must be a function (got string)");
  });
});
