// A store-backed gateway owns its programs: POST /programs creates the stored row, the official
// openai client's calls are recorded into it, release ends it with the termination given, and a
// call for an unknown or ended program is refused before it reaches the engine.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestStack, type TestStack } from "../testing/test-stack.js";

let stack: TestStack;

beforeAll(async () => {
  stack = await startTestStack(() => "Answer: 42");
});

afterAll(async () => {
  await stack?.close();
});

async function admin(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${stack.gatewayUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** Requests the engine has served, from its own Prometheus counter. */
async function engineRequests(): Promise<number> {
  const text = await (await fetch(`${stack.engineUrl}/metrics`)).text();
  return [...text.matchAll(/^vllm:request_success_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

const ask = (client: OpenAI) => client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 6*7?" }], max_tokens: 16 });

async function status(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
    return 200;
  } catch (e) {
    return (e as { status?: number }).status;
  }
}

describe("store-backed gateway: one owner of each program", () => {
  it("a program created only through POST /programs completes calls with the openai client, recorded in the store", async () => {
    const created = await admin("/programs", {});
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/p/${id}/v1`, apiKey: created.json.api_key as string, maxRetries: 0 });
    const first = await ask(client);
    expect(first.choices[0]?.message.content).toBe("Answer: 42");
    await ask(client);
    // Ended with the termination its owner gives; the answer comes once the store has it.
    expect((await admin(`/programs/${id}/release`, { termination: { kind: "completed", detail: "answered" } })).status).toBe(200);
    const t = await stack.store.getTrajectory(id);
    expect(t?.program).toMatchObject({ id, runId: "run", groupId: id, state: "terminated", termination: { kind: "completed", detail: "answered" } });
    expect(t?.calls.map((c) => [c.index, c.outputText])).toEqual([
      [0, "Answer: 42"],
      [1, "Answer: 42"],
    ]);
    // An ended program: 409, and the engine serves nothing more.
    const before = await engineRequests();
    expect(before).toBeGreaterThanOrEqual(2);
    expect(await status(ask(client))).toBe(409);
    expect(await engineRequests()).toBe(before);
  });

  it("an unknown program id gets 404 and the engine receives nothing", async () => {
    const before = await engineRequests();
    const outputs = stack.executor.outputs.length;
    const ghost = new OpenAI({ baseURL: `${stack.gatewayUrl}/p/ghost/v1`, apiKey: ADMIN_TOKEN, maxRetries: 0 });
    const err = await ask(ghost).then(
      () => undefined,
      (e: unknown) => e as { status?: number; message?: string },
    );
    expect(err?.status).toBe(404);
    expect(err?.message).toMatch(/program 'ghost' is not open/);
    expect(await engineRequests()).toBe(before);
    expect(stack.executor.outputs.length).toBe(outputs);
    expect(await stack.store.getTrajectory("ghost")).toBeUndefined();
  });

  it("refuses a program the store cannot hold (400, naming why) and keeps nothing of it", async () => {
    const r = await admin("/programs", { id: "lost", run_id: "no-such-run" });
    expect(r.status).toBe(400);
    expect((r.json.error as { message: string }).message).toBe("program 'lost' could not be created in the store: createGroup 'lost': unknown run 'no-such-run'");
    expect((await admin("/programs", { id: "lost", group_id: "g" })).status).toBe(400);
    expect((await admin("/programs", { id: "lost" })).status).toBe(201);
    expect((await admin("/programs/lost/release", { termination: { kind: "nope" } })).status).toBe(400);
  });
});
