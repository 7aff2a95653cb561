// `arbor serve gateway` over a backend `type: disagg`: the cluster file lists a prefill and a decode engine
// process (`arbor serve engine --role`, on models/calc-sft.gguf and the Redis KV pool) as one backend, and a
// program's call through the gateway is prefilled on one, decoded on the other and recorded with the same
// prompt ids, output ids and logprobs as the same call through a second gateway over one mixed engine.
// `arbor run` without --cluster takes the same backend (its engines reached by URL, as they run apart).
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import { openStore } from "../store/registry.js";
import { freePort, spawnArbor, waitReady, type ArborProcess } from "../testing/arbor-services.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { REDIS_TEST_URL, redisUnreachable } from "../testing/redis-test.js";

const root = join(import.meta.dirname, "../..");
const unreachable = (await postgresUnreachable()) ?? (await redisUnreachable());

/** Requests an engine finished, from its /metrics. */
async function finished(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return [...text.matchAll(/^vllm:request_success_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

describe.skipIf(unreachable !== undefined)(`arbor serve gateway over a type: disagg backend${unreachable ? ` (skipped: ${unreachable})` : ""}`, () => {
  const schema = testSchemaName();
  const poolName = `test-${randomBytes(6).toString("hex")}`;
  const dir = mkdtempSync(join(tmpdir(), "arbor-gw-disagg-"));
  const running: ArborProcess[] = [];
  let base: { p0: string; d0: string; m0: string; gwPd: string; gwMixed: string };

  beforeAll(async () => {
    const ports = { p0: await freePort(), d0: await freePort(), m0: await freePort(), gwPd: await freePort(), gwMixed: await freePort() };
    base = Object.fromEntries(Object.entries(ports).map(([k, p]) => [k, `http://127.0.0.1:${p}`])) as typeof base;
    const pool = `kvPool: {url: "${REDIS_TEST_URL}", name: ${poolName}, capacityBytes: 67108864}`;
    // One sequence each: every engine computes its one prompt afresh (no reused prefix), so logprobs agree bit for bit.
    const engine = (name: string, port: number, extra = ""): string => `  - {name: ${name}, host: 127.0.0.1, port: ${port}, sequences: 1, contextSize: 512${extra}}`;
    const common = [
      "name: gw-disagg-test",
      `model: {path: ${join(root, "models/calc-sft.gguf")}}`,
      `store: {kind: postgres, url: "${POSTGRES_TEST_URL}", schema: ${schema}}`,
      "engines:",
      engine("p0", ports.p0, `, role: prefill, ${pool}`),
      engine("d0", ports.d0, `, role: decode, ${pool}`),
      engine("m0", ports.m0),
    ];
    const disagg = join(dir, "disagg.yaml");
    writeFileSync(disagg, [...common, `backends: [{name: pd, type: disagg, prefill: ["${base.p0}/v1"], decode: ["${base.d0}/v1"]}]`, `gateway: {host: 127.0.0.1, port: ${ports.gwPd}}`].join("\n"));
    const mixed = join(dir, "mixed.yaml");
    writeFileSync(mixed, [...common, `backends: [{name: m0, type: builtin, url: "${base.m0}/v1"}]`, `gateway: {host: 127.0.0.1, port: ${ports.gwMixed}}`].join("\n"));
    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      await store.createRun({ id: "r1", name: "gw-disagg-test", configJson: "{}", startedAt: Date.now() });
    } finally {
      await store.close();
    }
    const svc = {
      p0: spawnArbor(["serve", "engine", "--cluster", disagg, "--name", "p0"]),
      d0: spawnArbor(["serve", "engine", "--cluster", disagg, "--name", "d0"]),
      m0: spawnArbor(["serve", "engine", "--cluster", disagg, "--name", "m0"]),
      gwPd: spawnArbor(["serve", "gateway", "--cluster", disagg]),
      gwMixed: spawnArbor(["serve", "gateway", "--cluster", mixed]),
    };
    running.push(...Object.values(svc));
    for (const k of ["p0", "d0", "m0", "gwPd", "gwMixed"] as const) await waitReady(base[k], svc[k]);
    expect(svc.gwPd.log()).toContain(`over pd (disagg: prefill ${base.p0}/v1; decode ${base.d0}/v1)`);
  }, 180_000);

  afterAll(async () => {
    for (const s of running) if (s.child.exitCode === null) s.child.kill("SIGKILL");
    await Promise.all(running.map((s) => s.exited));
    const admin = new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 1, name: poolName });
    await admin.clear();
    await admin.close();
    await dropTestSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  /** One program with one seeded call through the gateway at `gw`; its recorded call. */
  async function oneCall(gw: string): Promise<Call> {
    const created = await fetch(`${gw}/programs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ run_id: "r1", task_id: "t1" }) });
    expect(created.status).toBe(201);
    const { id, api_key } = (await created.json()) as { id: string; api_key: string };
    const client = new OpenAI({ baseURL: `${gw}/p/${id}/v1`, apiKey: api_key, maxRetries: 0 });
    const answer = await client.chat.completions.create({
      model: "arbor-tiny",
      messages: [
        { role: "system", content: "You are a calculator. Use the calc tool, then answer with 'Answer: <n>'." },
        { role: "user", content: "Compute 17*4-9." },
      ],
      max_tokens: 24,
      temperature: 1,
      seed: 11,
    });
    expect(answer.choices[0]?.message).toBeDefined();
    const released = await fetch(`${gw}/programs/${id}/release`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ termination: { kind: "completed" } }) });
    expect(released.status).toBe(200);
    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      const t = await store.getTrajectory(id);
      expect(t?.calls).toHaveLength(1);
      return t!.calls[0]!;
    } finally {
      await store.close();
    }
  }

  it("answers a call through the prefill and decode engine processes with the mixed engine's tokens and logprobs", async () => {
    const before = { p0: await finished(base.p0), d0: await finished(base.d0) };
    const split = await oneCall(base.gwPd);
    // The prefill engine answered its one token, the decode engine the whole completion.
    expect(await finished(base.p0)).toBe(before.p0 + 1);
    expect(await finished(base.d0)).toBe(before.d0 + 1);
    const whole = await oneCall(base.gwMixed);
    expect(split.backend).toBe("pd");
    expect(whole.backend).toBe("m0");
    expect(split.outputTokenIds.length).toBeGreaterThan(1);
    expect(split.promptTokenIds).toEqual(whole.promptTokenIds);
    expect(split.outputTokenIds).toEqual(whole.outputTokenIds);
    expect(split.logprobs).toEqual(whole.logprobs);
  }, 120_000);

  it("`arbor run` (embedded) routes its programs through the same pair by URL", async () => {
    const before = { p0: await finished(base.p0), d0: await finished(base.d0) };
    // Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
    chmodSync(dir, 0o755);
    const run = join(dir, "run.yaml");
    writeFileSync(
      run,
      JSON.stringify({
        name: "embedded-disagg",
        model: { path: join(root, "models/calc-sft.gguf") },
        backends: [{ name: "pd", type: "disagg", prefill: [`${base.p0}/v1`], decode: [`${base.d0}/v1`] }],
        env: { name: "calc", tasks: 1, seed: 7 },
        rollout: { groupSize: 2, concurrency: 2 },
        agent: { maxTurns: 2, maxTokensPerCall: 16, maxTotalTokens: 64, temperature: 1.0 },
        sandbox: { root: join(dir, "sandboxes") },
        output: { dir: join(dir, "out") },
      }),
    );
    const r = spawnArbor(["run", run, "--no-progress"]);
    running.push(r);
    expect(await r.exited, r.log()).toBe(0);
    expect(r.log()).toMatch(/programs\s+2 \(completed 2\)/);
    const calls = Number(/calls\s+(\d+) model calls/.exec(r.log())?.[1]);
    expect(calls).toBeGreaterThanOrEqual(2);
    // Every call was prefilled on p0; decoded on d0 unless its first token ended it.
    expect(await finished(base.p0)).toBe(before.p0 + calls);
    expect(await finished(base.d0)).toBeGreaterThan(before.d0);
  }, 120_000);
});
