// POST /runs and POST /runs/:id/end on a store-backed gateway without a default run: a run is created in the store
// (then programs can be created in it), a second with its id is refused, ending is idempotent, an unknown run is a
// 404, a run the gateway did not create is not its to end, both need the admin token, and a gateway without a store
// says its programs need no run.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../backends/builtin.js";
import { openStore } from "../store/registry.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { createGateway, type Gateway } from "./server.js";

const ADMIN = "admin-token-for-run-routes";
const dir = mkdtempSync(join(tmpdir(), "arbor-run-routes-"));
let store: TrajectoryStore;
let gateway: Gateway;
let bare: Gateway;
let url: string;
let bareUrl: string;
// No engine is called: the backend's URL is never reached.
const backend = () => createBuiltinBackend({ name: "b0", url: "http://127.0.0.1:9/v1" });

beforeAll(async () => {
  store = await openStore({ kind: "sqlite", path: join(dir, "store.sqlite") });
  gateway = createGateway({ backends: [backend()], store, auth: { adminToken: ADMIN, requireProgramKeys: true } });
  url = await gateway.listen("127.0.0.1", 0);
  bare = createGateway({ backends: [backend()], sink: { recordCall: async () => {} } });
  bareUrl = await bare.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await bare?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = async (base: string, path: string, body?: unknown, token: string | null = ADMIN): Promise<{ status: number; json: { id?: string; error?: { message: string; param?: string | null } } }> => {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as { id?: string; error?: { message: string } } };
};

describe("run routes", () => {
  it("create a run its programs then go in, refuse its id twice, and end it once however often asked", async () => {
    expect((await post(url, "/programs", { id: "p-before" })).json.error?.message).toMatch(/^run_id: required/);
    const created = await post(url, "/runs", { id: "judges-1", name: "validate calc", config: { judges: ["a"] } });
    expect(created).toEqual({ status: 201, json: { id: "judges-1" } });
    expect(await store.getRun("judges-1")).toMatchObject({ name: "validate calc", configJson: '{"judges":["a"]}' });
    expect((await post(url, "/programs", { id: "p-in-run", run_id: "judges-1" })).status).toBe(201);
    expect((await post(url, "/runs", { id: "judges-1", name: "again" })).status).toBe(409);
    expect((await post(url, "/runs/judges-1/end")).json).toEqual({ id: "judges-1", ended: true });
    const ended = (await store.getRun("judges-1"))?.endedAt;
    expect(ended).toBeGreaterThan(0);
    expect((await post(url, "/runs/judges-1/end")).status).toBe(200);
    expect((await store.getRun("judges-1"))?.endedAt).toBe(ended);
    expect((await post(url, "/runs/nope/end")).status).toBe(404);
    // A run another process writes (an orchestrator's) is not the gateway's to end.
    await store.createRun({ id: "orchestrated", name: "arbor run", configJson: "{}", startedAt: 1 });
    expect(await post(url, "/runs/orchestrated/end")).toMatchObject({ status: 403, json: { error: { message: "run 'orchestrated' was not created through this gateway: its own process ends it" } } });
    expect((await store.getRun("orchestrated"))?.endedAt).toBeUndefined();
    // Without an id, the gateway names the run.
    expect((await post(url, "/runs", { name: "unnamed" })).json.id).toMatch(/^run-/);
  });

  it("name the field of a bad request, need the admin token, and say a store-less gateway needs no run", async () => {
    expect((await post(url, "/runs", {})).json.error).toMatchObject({ param: "name", message: "name: required: a string of 1-256 characters" });
    expect((await post(url, "/runs", { name: "x", config: [1] })).json.error?.param).toBe("config");
    expect((await post(url, "/runs", { name: "x" }, null)).status).toBe(401);
    expect((await post(url, "/runs/judges-1/end", undefined, "arbor-pk-not-admin")).status).toBeGreaterThanOrEqual(401);
    expect(await post(bareUrl, "/runs", { name: "x" })).toMatchObject({ status: 400, json: { error: { message: "this gateway has no store: its programs need no run (create them without run_id)" } } });
  });
});
