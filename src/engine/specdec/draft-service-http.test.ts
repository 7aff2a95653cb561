// The draft service in process and over HTTP (client against the routes on a real loopback server): the
// same contract; two engines sharing one group's tree through the server; the error shape on the wire.
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DraftServiceClient } from "./draft-service-client.js";
import { registerDraftServiceRoutes } from "./draft-service-routes.js";
import { draftServiceContract } from "./draft-service.contract.js";
import { GroupDraftService } from "./group-draft-service.js";
import { GroupReplica } from "./group-replica.js";

const BOUNDS = { maxDepth: 8, maxSequencesPerGroup: 2 };

async function serve(svc: GroupDraftService): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  await registerDraftServiceRoutes(app, svc);
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url };
}

draftServiceContract("in process", async () => {
  const clock = new VirtualClock();
  return { service: new GroupDraftService({ clock, ...BOUNDS }), clock, close: async () => {} };
});

draftServiceContract("HTTP client and routes", async () => {
  const clock = new VirtualClock();
  const { app, url } = await serve(new GroupDraftService({ clock, ...BOUNDS }));
  return { service: new DraftServiceClient(url), clock, close: () => app.close() };
});

describe("draft service over HTTP", () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("two engines share a group's tree: one's tokens draft the other's request", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 8 });
    const s = await serve(svc);
    app = s.app;
    const engineA = new DraftServiceClient(s.url);
    const engineB = new DraftServiceClient(s.url);
    await engineA.registerGroup("prompt-7", 60_000);
    await engineA.update("prompt-7", "resp-0", 0, [10, 11, 12, 13, 14]);
    await engineA.update("prompt-7", "resp-0", 5, [15, 16]);
    // Engine B drafts its own request with the service's tree, or from a local copy it keeps in sync.
    await engineB.update("prompt-7", "resp-1", 0, [10, 11]);
    expect((await engineB.draft({ groupId: "prompt-7", context: [10, 11] })).tokens).toEqual([12, 13]);
    const replica = new GroupReplica(engineB, { maxDepth: 8 });
    await replica.sync(["prompt-7"]);
    expect(replica.draft("prompt-7", [12, 13, 14], { maxSpecFactor: 2 })).toEqual(await engineB.draft({ groupId: "prompt-7", context: [12, 13, 14], maxSpecFactor: 2 }));
    await engineA.update("prompt-7", "resp-0", 7, [17]);
    await replica.sync(["prompt-7"]);
    expect(replica.sequences("prompt-7")).toEqual(svc.sequences("prompt-7"));
  });

  it("answers errors in OpenAI's shape with the field in snake_case", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock() });
    const s = await serve(svc);
    app = s.app;
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${s.url}/v1/specdec${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { error: { message: string; param: string | null; code: string | null } } };
    };
    await post("/groups", { group_id: "g", ttl_ms: 1000 });
    await post("/update", { group_id: "g", request_id: "r", prev_len: 0, new_tokens: [1] });
    const gap = await post("/update", { group_id: "g", request_id: "r", prev_len: 3, new_tokens: [1] });
    expect(gap.status).toBe(400);
    expect(gap.body.error).toMatchObject({ param: "prev_len", code: "gap" });
    expect(gap.body.error.message).toMatch(/^prev_len: 3 is past the end/);
    const bad = await post("/update", { group_id: "g", request_id: "r", prev_len: 1, new_tokens: [2, -1] });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ param: "new_tokens[1]" });
    const conflict = await post("/update", { group_id: "g", request_id: "r", prev_len: 0, new_tokens: [5] });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.param).toBe("new_tokens[0]");
    const missing = await post("/draft", { group_id: "nope", context: [1] });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ param: "group_id", code: "not_found" });
    const badProb = await post("/draft", { group_id: "g", context: [1], min_token_prob: 3 });
    expect(badProb.body.error).toMatchObject({ param: "min_token_prob" });
  });

  it("an unreachable service is an error naming the URL", async () => {
    const s = await serve(new GroupDraftService({ clock: new VirtualClock() }));
    await s.app.close();
    await expect(new DraftServiceClient(s.url).fetch(["g"], 0)).rejects.toThrow(`draft service: cannot reach ${s.url}/v1/specdec/fetch`);
  });
});
