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

  it("lets a resumed training run go on on engines serving its version and file, or version 0 (it loads it there)", async () => {
    const resumed = { version: 2, checkpoint: "ckpt/policy-v2.gguf" };
    expect(await clusterStartVersion([await engine("e0", 2), await engine("e1", 2)], true, () => {}, resumed)).toBe(2);
    expect(await clusterStartVersion([await engine("e0", 0)], true, () => {}, resumed)).toBe(0);
    const ahead = [await engine("e0", 3)];
    await expect(clusterStartVersion(ahead, true, () => {}, resumed)).rejects.toThrow(
      "cluster engines serve policy version 3 (e0 v3 (ckpt/policy-v3.gguf)); the resumed run goes on from policy version 2 (ckpt/policy-v2.gguf): restart the engines (arbor serve engine) first (it loads its checkpoint on engines at version 0)",
    );
    // The same version from another run's checkpoint is not this run's policy.
    await expect(clusterStartVersion([await engine("e0", 2)], true, () => {}, { version: 2, checkpoint: "other/policy-v2.gguf" })).rejects.toThrow(/the resumed run goes on from policy version 2 \(other\/policy-v2\.gguf\)/);
    // Killed before its first step: it goes on from its model file.
    await expect(clusterStartVersion(ahead, true, () => {}, { version: 0 })).rejects.toThrow(/the resumed run goes on from version 0 of its model\.path: restart the engines \(arbor serve engine\) first$/);
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
