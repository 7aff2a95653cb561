// Prefill/decode disaggregation across processes: `arbor serve engine --role prefill` and
// `--role decode` (the roles given on the command line over the file's `mixed`) and one mixed engine,
// three processes on models/calc-sft.gguf, the prefill engine handing each prompt's KV to the decode
// engine through the Redis KV pool. The decode engine's answers carry the same token ids and, bit for
// bit, the same logprobs as the mixed engine's. (The mixed engine computes each prompt afresh: one
// sequence, overwritten between prompts by an unrelated one, so no earlier prefix is reused — reuse
// evaluates the prompt's tail alone, which can move llama.cpp's sums in the last digits.)
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import { freePort, spawnArbor, waitReady, type ArborProcess } from "../testing/arbor-services.js";
import { REDIS_TEST_URL, redisUnreachable } from "../testing/redis-test.js";

const root = join(import.meta.dirname, "../..");
const unreachable = await redisUnreachable();
if (unreachable) console.warn(`skipping the prefill/decode process test: ${unreachable}`);

const serve = (args: string[]): ArborProcess => spawnArbor(["serve", ...args]);

interface Answer {
  choices: { token_ids: number[]; finish_reason: string; logprobs: { content: { token: string; logprob: number; top_logprobs: { token: string; logprob: number }[] }[] } }[];
  prompt_token_ids: number[];
  kv_transfer_params?: Record<string, unknown>;
  error?: { message: string };
}

async function chat(base: string, body: Record<string, unknown>): Promise<Answer> {
  const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = (await r.json()) as Answer;
  expect(r.status, JSON.stringify(json)).toBe(200);
  return json;
}

const SYSTEM = "You are a calculator. Use the calc tool, then answer with 'Answer: <n>'.";
const QUESTIONS = ["What is 2+3?", "Compute 17*4-9.", "What is (8+5)*3?", "How much is 120/6+7?", "Add 11 and 31."];

describe.skipIf(unreachable !== undefined)("arbor serve engine --role prefill | decode", () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-disagg-"));
  const poolName = `test-${randomBytes(6).toString("hex")}`;
  const running: ArborProcess[] = [];
  let base: { mixed: string; prefill: string; decode: string };
  let services: { mixed: ArborProcess; prefill: ArborProcess; decode: ArborProcess };

  beforeAll(async () => {
    const ports = { mixed: await freePort(), prefill: await freePort(), decode: await freePort() };
    const pool = `kvPool: {url: "${REDIS_TEST_URL}", name: ${poolName}, capacityBytes: 67108864}`;
    const engine = (name: string, port: number, extra = "") => `  - {name: ${name}, host: 127.0.0.1, port: ${port}, sequences: 1, contextSize: 512${extra}}`;
    const cluster = join(dir, "cluster.yaml");
    writeFileSync(
      cluster,
      [
        "name: disagg-test",
        `model: {path: ${join(root, "models/calc-sft.gguf")}}`,
        // The engines never open the store; the file needs one for the gateway.
        'store: {kind: postgres, url: "postgres://postgres@127.0.0.1:5432/unused"}',
        "engines:",
        engine("mixed", ports.mixed),
        // Both are `mixed` in the file: --role makes one a prefill and the other a decode engine.
        engine("p0", ports.prefill, `, ${pool}`),
        engine("d0", ports.decode, `, ${pool}`),
        `backends: [{name: mixed, type: builtin, url: "http://127.0.0.1:${ports.mixed}/v1"}]`,
      ].join("\n"),
    );
    services = {
      mixed: serve(["engine", "--cluster", cluster, "--name", "mixed"]),
      prefill: serve(["engine", "--cluster", cluster, "--name", "p0", "--role", "prefill"]),
      decode: serve(["engine", "--cluster", cluster, "--name", "d0", "--role", "decode"]),
    };
    running.push(services.mixed, services.prefill, services.decode);
    base = { mixed: `http://127.0.0.1:${ports.mixed}`, prefill: `http://127.0.0.1:${ports.prefill}`, decode: `http://127.0.0.1:${ports.decode}` };
    await Promise.all([waitReady(base.mixed, services.mixed), waitReady(base.prefill, services.prefill), waitReady(base.decode, services.decode)]);
  }, 120_000);

  afterAll(async () => {
    for (const s of running) if (s.child.exitCode === null) s.child.kill("SIGKILL");
    const admin = new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 1, name: poolName });
    await admin.clear();
    await admin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("two engine processes in prefill and decode roles produce the same tokens as one mixed engine", async () => {
    expect(services.prefill.log()).toMatch(/engine p0 listening on .* role prefill, llamacpp-scheduled, .*KV pool redis:\/\//);
    expect(services.decode.log()).toMatch(/engine d0 listening on .* role decode,/);
    let handedOver = 0;
    for (const [i, question] of QUESTIONS.entries()) {
      const body = {
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: question },
        ],
        max_tokens: 24,
        temperature: 1,
        seed: 7 + i,
        logprobs: true,
        top_logprobs: 3,
        return_token_ids: true,
      };
      // The mixed engine's only sequence gets a prompt sharing no token with the chats (no BOS first).
      const flush = await fetch(`${base.mixed}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: [40, 41, 42], max_tokens: 1 }),
      });
      expect(flush.status).toBe(200);
      const want = await chat(base.mixed, body);
      const prefilled = await chat(base.prefill, { ...body, kv_transfer_params: { do_remote_decode: true } });
      const kv = prefilled.kv_transfer_params as { done: boolean; kv_key: string; kv_tokens: number; first_token: { id: number } };
      expect(kv.first_token?.id ?? prefilled.choices[0]!.token_ids[0]).toBe(want.choices[0]!.token_ids[0]);
      const got = kv.done ? prefilled : await chat(base.decode, { ...body, kv_transfer_params: { do_remote_prefill: true, kv_key: kv.kv_key, first_token: kv.first_token } });
      if (!kv.done) {
        handedOver++;
        expect(kv.kv_tokens).toBe(want.prompt_token_ids.length);
        expect(got.kv_transfer_params).toMatchObject({ kv_loaded: true, kv_tokens: want.prompt_token_ids.length });
      }
      const g = got.choices[0]!;
      const w = want.choices[0]!;
      expect(g.token_ids).toEqual(w.token_ids);
      expect(g.finish_reason).toBe(w.finish_reason);
      expect(got.prompt_token_ids).toEqual(want.prompt_token_ids);
      expect(g.logprobs.content.map((c) => [c.token, c.top_logprobs.map((t) => t.token)])).toEqual(w.logprobs.content.map((c) => [c.token, c.top_logprobs.map((t) => t.token)]));
      expect(g.logprobs.content).toEqual(w.logprobs.content);
    }
    expect(handedOver).toBeGreaterThanOrEqual(QUESTIONS.length - 1);
    // The roles hold across processes: the decode engine refuses a plain request, naming the field.
    const r = await fetch(`${base.decode}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as Answer).error?.message).toMatch(/^kv_transfer_params: engine d0 serves the decode role/);

    for (const s of running) s.child.kill("SIGTERM");
    for (const s of running) expect(await s.exited).toBe(0);
  }, 120_000);
});
