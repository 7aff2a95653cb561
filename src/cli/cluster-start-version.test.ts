// clusterStartVersion: the policy version a deployment's engines serve as a run starts, checked against the run.
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, describe, expect, it } from "vitest";
import type { SyncedEngine } from "../loop/weight-sync.js";
import { clusterStartVersion } from "./cluster-services.js";

const apps: FastifyInstance[] = [];
afterAll(async () => {
  for (const a of apps) await a.close();
});

/** An engine answering /v1/policy_version with `version` (and a weights file past version 0). */
async function engine(name: string, version: number): Promise<SyncedEngine> {
  const app = Fastify();
  app.get("/v1/policy_version", async () => ({ policy_version: version, model_path: version === 0 ? "models/calc-sft.gguf" : `ckpt/policy-v${version}.gguf`, is_sleeping: false }));
  apps.push(app);
  return { name, url: await app.listen({ host: "127.0.0.1", port: 0 }) };
}

describe("clusterStartVersion", () => {
  it("takes the version the engines serve for a rollout, and refuses a training run on a later one", async () => {
    const fresh = [await engine("e0", 0), await engine("e1", 0)];
    expect(await clusterStartVersion(fresh, true, () => {})).toBe(0);
    const trained = [await engine("e0", 2), await engine("e1", 2)];
    expect(await clusterStartVersion(trained, false, () => {})).toBe(2);
    await expect(clusterStartVersion(trained, true, () => {})).rejects.toThrow(
      "cluster engines serve policy version 2 (e0 v2 (ckpt/policy-v2.gguf), e1 v2 (ckpt/policy-v2.gguf)), left by an earlier training run; a training run starts from version 0 of its model.path: restart the engines (arbor serve engine) first",
    );
    await expect(clusterStartVersion([fresh[0]!, trained[1]!], false, () => {})).rejects.toThrow(/^cluster engines serve different policy versions \(e0 v0 \(models\/calc-sft\.gguf\), e1 v2 \(ckpt\/policy-v2\.gguf\)\): restart them/);
  });

  it("leaves out an engine that does not answer, saying so", async () => {
    const dead = Fastify();
    const url = await dead.listen({ host: "127.0.0.1", port: 0 });
    await dead.close();
    const lines: string[] = [];
    expect(await clusterStartVersion([await engine("e0", 3), { name: "e1", url }], false, (l) => lines.push(l))).toBe(3);
    expect(lines).toEqual([`engines  engine e1 (${url}): cannot read its policy version: fetch failed: connect ECONNREFUSED ${url.replace("http://", "")} (ECONNREFUSED): left out of the policy version check`]);
  });
});
