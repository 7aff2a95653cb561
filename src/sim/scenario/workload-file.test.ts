import { describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { SEER_TABLE3 } from "../seer-workload.js";
import { getScenario, scenarioNames } from "./registry.js";
import { parseWorkload, WORKLOAD_PARSERS } from "./workload-file.js";

const GOOD = `
name: w
kind: rollout
description: d
sources: [s]
cluster: { gpus: 2, gpusPerInstance: 1, profile: moonlight-16b-a3b/h800, maxNumSeqs: 8 }
workload: { prompts: 4, groupSize: 2, maxTokens: 100, meanTokens: 30, promptTokens: [8, 16], groupSigma: 0.5, sampleSigma: 0.5 }
divided: { chunkTokens: 32 }
`;

describe("workload files", () => {
  it("ships Seer's three Table 3 workloads at full scale, with their sources", async () => {
    expect(scenarioNames).toEqual(expect.arrayContaining(["seer-kimik2", "seer-moonlight", "seer-qwen2vl"]));
    const table: Record<string, { gpus: number; t: (typeof SEER_TABLE3)[keyof typeof SEER_TABLE3] }> = {
      "seer-moonlight": { gpus: 32, t: SEER_TABLE3.moonlight },
      "seer-qwen2vl": { gpus: 128, t: SEER_TABLE3["qwen2-vl-72b"] },
      "seer-kimik2": { gpus: 256, t: SEER_TABLE3["kimi-k2"] },
    };
    for (const [name, { gpus, t }] of Object.entries(table)) {
      const s = await getScenario(name);
      expect(s.info.kind).toBe("rollout");
      expect(s.info.scale).toMatchObject({ gpus, requestsPerIteration: t.requests, groupSize: t.groupSize, maxOutputTokens: t.maxTokens, meanOutputTokens: t.meanTokens });
      expect(s.info.sources.join(" ")).toMatch(/Table 3/);
      expect(s.systems).toEqual(["verl-like", "seer-divided", "seer", "seer-specdec", "oracle", "arbor"]);
    }
  });

  it("names the field and the reason of a bad file", () => {
    expect(() => parseWorkload(GOOD.replace("gpus: 2", "gpus: -2"), "w.yaml")).toThrow(/w\.yaml: cluster\.gpus: /);
    expect(() => parseWorkload(GOOD.replace("kind: rollout", "kind: batch"), "w.yaml")).toThrow(/w\.yaml: kind: /);
    expect(() => parseWorkload(GOOD.replace("sources: [s]", "sources: []"), "w.yaml")).toThrow(/sources/);
    expect(() => parseWorkload(GOOD.replace("divided:", "dividd:"), "w.yaml")).toThrow(/w\.yaml: /);
    expect(() => parseWorkload(GOOD.replace("moonlight-16b-a3b/h800", "nope/gpu"), "w.yaml")).toThrow(/unknown cost profile "nope\/gpu"/);
    expect(() => parseWorkload(GOOD.replace("gpusPerInstance: 1", "gpusPerInstance: 2"), "w.yaml")).toThrow(/gpusPerInstance is 2 but profile moonlight-16b-a3b\/h800 spans 1/);
    expect(() => parseWorkload(GOOD.replace("meanTokens: 30", "meanTokens: 300"), "w.yaml")).toThrow(/meanTokens must be below maxTokens/);
    expect(() => parseWorkload("[1, 2]", "w.yaml")).toThrow(/must be a YAML mapping/);
    expect(() => parseWorkload("a: [", "w.yaml")).toThrow(/not valid YAML/);
    // A modelled workload says what it models and where its figures come from; zod's messages name the value.
    expect(() => parseWorkload(GOOD.replace("description: d\n", ""), "w.yaml")).toThrow("workload file w.yaml: description: required: a sentence saying what the workload models");
    expect(() => parseWorkload(GOOD.replace("sources: [s]\n", ""), "w.yaml")).toThrow(/^workload file w\.yaml: sources: required: a list naming where/);
    expect(() => parseWorkload(GOOD.replace("prompts: 4", "prompts: four"), "w.yaml")).toThrow('workload file w.yaml: workload.prompts: expected a number, got "four"');
  });

  it("a replay needs neither description nor sources: the stored run is its source", () => {
    const s = parseWorkload("name: r\nkind: replay\nstore: s.sqlite\nrunId: run-1\ncluster: { engines: 1 }\n", "/tmp/r.yaml");
    expect(s.info).toMatchObject({ name: "r", kind: "replay", description: "a stored Arbor run replayed" });
    expect(s.info.sources).toEqual(["Arbor run run-1 in /tmp/s.sqlite: prompt/output token counts and tool gaps of every call"]);
  });

  it("dispatches on kind: a kind without a parser is refused by name", () => {
    expect(Object.keys(WORKLOAD_PARSERS)).toContain("rollout");
    if (WORKLOAD_PARSERS.agent === undefined) expect(() => parseWorkload(GOOD.replace("kind: rollout", "kind: agent"), "w.yaml")).toThrow(/kind 'agent' has no parser yet/);
    expect(parseWorkload(GOOD, "w.yaml").info.name).toBe("w");
  });

  it("an unknown workload name lists the shipped ones; a workload file that is not there is said so", async () => {
    await expect(getScenario("seer-nope")).rejects.toThrow(/unknown sim workload 'seer-nope' \(known: .*seer-moonlight/);
    await expect(getScenario("/nonexistent/w.yaml")).rejects.toThrow(new ArborError("workload file /nonexistent/w.yaml: no such file", "config"));
  });
});
