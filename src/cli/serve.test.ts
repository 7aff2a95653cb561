// `arbor serve engine` and `arbor serve gateway` as separate processes from one cluster.yaml: readiness
// flips to 200, an OpenAI client's call through the gateway is answered by the engine process and
// recorded in Postgres, SIGTERM drains (readiness 503, new work 503, the call in flight completes, exit 0; the
// gateway started again takes back the program left active),
// and config errors exit 1 with one line.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../store/registry.js";
import { freePort, readyz, spawnArbor, waitReady, type ArborProcess } from "../testing/arbor-services.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";

const unreachable = await postgresUnreachable();
const serve = (args: string[]): ArborProcess => spawnArbor(["serve", ...args]);

/** Wait (bounded: 30 s) until the engine reports a request running. */
async function untilRunning(base: string): Promise<void> {
  const started = Date.now();
  while (Date.now() - started < 30_000) {
    const text = await (await fetch(`${base}/metrics`)).text();
    if (/^vllm:num_requests_running\{[^}]*\} [1-9]/m.test(text)) return;
    await new Promise((r) => globalThis.setTimeout(r, 50));
  }
  throw new Error(`${base}: no request running after 30 s`);
}

function writeCluster(dir: string, file: string, lines: string[]): string {
  const path = join(dir, file);
  writeFileSync(path, lines.join("\n"));
  return path;
}

describe.skipIf(unreachable !== undefined)("arbor serve engine / gateway", () => {
  const schema = testSchemaName();
  const dir = mkdtempSync(join(tmpdir(), "arbor-serve-"));
  let ports: { e0: number; slow: number; gw: number; gwSlow: number };
  let cluster = "";
  let slowCluster = "";
  const running: ArborProcess[] = [];

  beforeAll(async () => {
    ports = { e0: await freePort(), slow: await freePort(), gw: await freePort(), gwSlow: await freePort() };
    const common = [
      "name: serve-test",
      `store: {kind: postgres, url: "${POSTGRES_TEST_URL}", schema: ${schema}}`,
      "engines:",
      `  - {name: e0, host: 127.0.0.1, port: ${ports.e0}, sequences: 2, contextSize: 1024}`,
      // Modelled time (about 12 ms a token on the real clock): a call of 400 tokens takes seconds.
      `  - {name: slow, host: 127.0.0.1, port: ${ports.slow}, sequences: 2, contextSize: 1024, executor: costmodel, costProfile: llama-3-8b/h100}`,
    ];
    cluster = writeCluster(dir, "cluster.yaml", [...common, `backends: [{name: e0, type: builtin, url: "http://127.0.0.1:${ports.e0}/v1"}]`, `gateway: {host: 127.0.0.1, port: ${ports.gw}}`]);
    slowCluster = writeCluster(dir, "slow.yaml", [...common, `backends: [{name: slow, type: builtin, url: "http://127.0.0.1:${ports.slow}/v1"}]`, `gateway: {host: 127.0.0.1, port: ${ports.gwSlow}}`]);
    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      await store.createRun({ id: "r1", name: "serve-test", configJson: "{}", startedAt: Date.now() });
    } finally {
      await store.close();
    }
  });

  afterAll(async () => {
    for (const s of running) if (s.child.exitCode === null) s.child.kill("SIGKILL");
    await dropTestSchema(schema);
  });

  it("a call through the gateway process is answered by the engine process and recorded in Postgres; SIGTERM exits 0", async () => {
    // The engine logs pino's JSON lines at debug (Fastify's request logs included); the gateway plain text.
    const engine = spawnArbor(["--log-format", "json", "--log-level", "debug", "serve", "engine", "--cluster", cluster, "--name", "e0"]);
    const gateway = serve(["gateway", "--cluster", cluster]);
    running.push(engine, gateway);
    const gw = `http://127.0.0.1:${ports.gw}`;
    const eng = `http://127.0.0.1:${ports.e0}`;
    await waitReady(eng, engine);
    await waitReady(gw, gateway);
    expect((await fetch(`${gw}/healthz`)).status).toBe(200);
    expect(gateway.log()).toMatch(new RegExp(`gateway listening on ${gw} \\(sticky-program over e0 `));

    const created = await fetch(`${gw}/programs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ run_id: "r1", task_id: "t1" }) });
    expect(created.status).toBe(201);
    const { id, api_key } = (await created.json()) as { id: string; api_key: string };
    const client = new OpenAI({ baseURL: `${gw}/p/${id}/v1`, apiKey: api_key, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 2+3?" }], max_tokens: 8 });
    expect(answer.choices[0]?.message).toBeDefined();
    const released = await fetch(`${gw}/programs/${id}/release`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ termination: { kind: "completed" } }) });
    expect(released.status).toBe(200);

    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      const t = await store.getTrajectory(id);
      expect(t?.program.state).toBe("terminated");
      expect(t?.program.termination?.kind).toBe("completed");
      expect(t?.calls).toHaveLength(1);
      const call = t!.calls[0]!;
      expect(call.backend).toBe("e0");
      expect(call.outputTokenIds.length).toBeGreaterThan(0);
      expect(call.promptTokenIds.length).toBeGreaterThan(0);
    } finally {
      await store.close();
    }

    gateway.child.kill("SIGTERM");
    engine.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
    expect(await engine.exited).toBe(0);
    expect(gateway.log()).toMatch(/gateway: drained\n[\s\S]*gateway: stopped/);
    expect(engine.log()).toMatch(/engine e0: stopped/);
    const json = engine
      .log()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: number; msg: string; component?: string; req?: { url?: string } });
    expect(json.some((l) => l.component === "engine" && l.level === 30 && /engine e0: stopped/.test(l.msg))).toBe(true);
    expect(json.some((l) => l.level === 30 && l.msg === "incoming request" && l.req?.url === "/v1/completions")).toBe(true);
    // Text format: the gateway's lines are plain, no JSON.
    expect(gateway.log().split("\n").some((l) => l.startsWith("{"))).toBe(false);
  }, 180_000);

  it("SIGTERM to the gateway during a slow call: readiness 503, new programs 503, the call completes, exit 0; restarted, it takes the program back", async () => {
    const engine = serve(["engine", "--cluster", slowCluster, "--name", "slow"]);
    const gateway = serve(["gateway", "--cluster", slowCluster]);
    running.push(engine, gateway);
    const gw = `http://127.0.0.1:${ports.gwSlow}`;
    await waitReady(`http://127.0.0.1:${ports.slow}`, engine);
    await waitReady(gw, gateway);
    const created = await fetch(`${gw}/programs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ run_id: "r1" }) });
    const { id, api_key } = (await created.json()) as { id: string; api_key: string };
    const client = new OpenAI({ baseURL: `${gw}/p/${id}/v1`, apiKey: api_key, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "count" }], max_tokens: 400, stream: true });
    const it = stream[Symbol.asyncIterator]();
    // The first chunk is here: the call is in flight at the gateway.
    const first = await it.next();
    expect(first.done).toBe(false);
    gateway.child.kill("SIGTERM");
    // Readiness goes 503 at once; new work is refused.
    let ready = await readyz(gw);
    for (let i = 0; i < 50 && ready.status === 200; i++) {
      await new Promise((r) => globalThis.setTimeout(r, 20));
      ready = await readyz(gw);
    }
    expect(ready.status).toBe(503);
    expect(ready.body).toEqual({ status: "draining", reason: "received SIGTERM" });
    const refused = await fetch(`${gw}/programs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ run_id: "r1" }) });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "draining", message: expect.stringMatching(/no new programs/) });
    const unknown = await fetch(`${gw}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-arbor-program": "nobody" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }) });
    expect(unknown.status).toBe(503);
    // The call in flight still completes.
    let chunks = 1;
    let finish: string | null | undefined;
    for (let n = await it.next(); !n.done; n = await it.next()) {
      chunks++;
      finish = n.value.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("length");
    expect(chunks).toBeGreaterThan(10);
    expect(await gateway.exited).toBe(0);
    expect(gateway.log()).toMatch(/gateway: received SIGTERM: draining \(readiness 503, new work refused; 1 request\(s\) in flight/);
    expect(gateway.log()).toMatch(/gateway: drained/);

    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      // Still active when the gateway stopped: left active in the store, for the gateway that starts next.
      expect((await store.getTrajectory(id))?.program.state).toBe("active");
      // The gateway restarted takes it back: its next call goes through, numbered after the recorded one.
      const again = serve(["gateway", "--cluster", slowCluster]);
      running.push(again);
      await waitReady(gw, again);
      expect(again.log()).toMatch(/took back 1 program\(s\) active in the store/);
      const next = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "count again" }], max_tokens: 4 });
      expect(next.choices[0]?.message).toBeDefined();
      const released = await fetch(`${gw}/programs/${id}/release`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ termination: { kind: "completed" } }) });
      expect(released.status).toBe(200);
      const t = await store.getTrajectory(id);
      expect(t?.program.termination?.kind).toBe("completed");
      expect(t?.calls.map((c) => c.index)).toEqual([0, 1]);
      again.child.kill("SIGTERM");
      expect(await again.exited).toBe(0);
    } finally {
      await store.close();
    }
    engine.child.kill("SIGTERM");
    expect(await engine.exited).toBe(0);
  }, 180_000);

  it("SIGTERM to an engine during a request: readiness 503, new requests 503, the request completes, exit 0", async () => {
    const engine = serve(["engine", "--cluster", slowCluster, "--name", "slow"]);
    running.push(engine);
    const base = `http://127.0.0.1:${ports.slow}`;
    await waitReady(base, engine);
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "count" }], max_tokens: 400, stream: true });
    const it = stream[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    engine.child.kill("SIGTERM");
    let ready = await readyz(base);
    for (let i = 0; i < 50 && ready.status === 200; i++) {
      await new Promise((r) => globalThis.setTimeout(r, 20));
      ready = await readyz(base);
    }
    expect(ready.status).toBe(503);
    const refused = await fetch(`${base}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "hi", max_tokens: 2 }) });
    expect(refused.status).toBe(503);
    let finish: string | null | undefined;
    for (let n = await it.next(); !n.done; n = await it.next()) finish = n.value.choices[0]?.finish_reason ?? finish;
    expect(finish).toBe("length");
    expect(await engine.exited).toBe(0);
    expect(engine.log()).toMatch(/engine slow: drained/);
  }, 120_000);

  it("a drain past --drain-ms cuts what is left and says so; a second signal exits at once with 143", async () => {
    const base = `http://127.0.0.1:${ports.slow}`;
    const body = JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "count" }], max_tokens: 800 });
    const post = { method: "POST", headers: { "content-type": "application/json" }, body };
    // Bounded drain: the 800-token request (about 10 s of modelled time) outlives --drain-ms 300.
    const bounded = serve(["engine", "--cluster", slowCluster, "--name", "slow", "--drain-ms", "300"]);
    running.push(bounded);
    await waitReady(base, bounded);
    const cut = fetch(`${base}/v1/chat/completions`, post).then((r) => r.status, () => "cut");
    await untilRunning(base);
    bounded.child.kill("SIGTERM");
    expect(await bounded.exited).toBe(0);
    expect(await cut).toBe("cut");
    expect(bounded.log()).toMatch(/engine slow: drain: 1 request\(s\) still in flight after 300 ms; aborting them/);

    const twice = serve(["engine", "--cluster", slowCluster, "--name", "slow"]);
    running.push(twice);
    await waitReady(base, twice);
    const held = fetch(`${base}/v1/chat/completions`, post).then((r) => r.status, () => "cut");
    await untilRunning(base);
    twice.child.kill("SIGTERM");
    for (let i = 0; i < 500 && !/draining/.test(twice.log()); i++) await new Promise((r) => globalThis.setTimeout(r, 20));
    expect(twice.log()).toMatch(/engine slow: received SIGTERM: draining/);
    twice.child.kill("SIGTERM");
    expect(await twice.exited).toBe(143);
    expect(await held).toBe("cut");
    expect(twice.log()).toMatch(/engine slow: received SIGTERM again while draining; exiting now/);
  }, 120_000);

  it("config errors exit 1 with one line: a sqlite store, an unknown engine name", async () => {
    const sqlite = writeCluster(dir, "sqlite.yaml", [
      "store: {kind: sqlite}",
      "engines: [{name: e0}]",
      'backends: [{name: e0, type: builtin, url: "http://127.0.0.1:1/v1"}]',
    ]);
    const g = serve(["gateway", "--cluster", sqlite]);
    expect(await g.exited).toBe(1);
    expect(g.log().trim().split("\n")).toEqual([expect.stringMatching(/^arbor: error: invalid cluster file .*sqlite\.yaml: store\.kind: sqlite cannot be shared across hosts/)]);

    const e = serve(["engine", "--cluster", cluster, "--name", "nope"]);
    expect(await e.exited).toBe(1);
    expect(e.log().trim().split("\n")).toEqual(["arbor: error: engine 'nope' is not in the cluster file (engines: e0, slow)"]);
  }, 60_000);
});
