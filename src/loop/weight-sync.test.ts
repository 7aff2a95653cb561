// Weight sync over a connection the engine drops: one retry, and never a second load of a version that arrived.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { loadWeightsEverywhere } from "./weight-sync.js";

interface FakeEngine {
  url: string;
  loads: number[];
  server: Server;
}

/**
 * An engine with /v1/load_weights and /v1/policy_version. `drop(n)` says whether the n-th load (0-based) has its
 * connection destroyed without an answer; `applyDropped` whether such a load was applied before the drop.
 */
async function fakeEngine(drop: (n: number) => boolean, applyDropped: boolean): Promise<FakeEngine> {
  const loads: number[] = [];
  let version = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.url === "/v1/policy_version") return res.end(JSON.stringify({ policy_version: version }));
      const n = loads.length;
      const v = (JSON.parse(body) as { policy_version: number }).policy_version;
      loads.push(v);
      if (drop(n)) {
        if (applyDropped) version = v;
        req.socket.destroy();
        return;
      }
      if (v <= version) {
        res.statusCode = 400;
        return res.end(JSON.stringify({ error: { message: `version ${v} is not newer than ${version}` } }));
      }
      version = v;
      res.end(JSON.stringify({ policy_version: v }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, loads, server };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function engine(drop: (n: number) => boolean, applyDropped: boolean): Promise<FakeEngine> {
  const e = await fakeEngine(drop, applyDropped);
  servers.push(e.server);
  return e;
}

describe("loadWeightsEverywhere over a dropped connection", () => {
  it("sends the load again once when the engine did not apply it", async () => {
    const e = await engine((n) => n === 0, false);
    await loadWeightsEverywhere([{ name: "e", url: e.url }], "/m.gguf", 1, "finish");
    expect(e.loads).toEqual([1, 1]);
  });

  it("does not send it again when the engine already serves the version", async () => {
    const e = await engine((n) => n === 0, true);
    await loadWeightsEverywhere([{ name: "e", url: e.url }], "/m.gguf", 1, "finish");
    expect(e.loads).toEqual([1]);
  });

  it("fails naming the engine and the cause when the retry fails too", async () => {
    const e = await engine(() => true, false);
    await expect(loadWeightsEverywhere([{ name: "e", url: e.url }], "/m.gguf", 1, "finish")).rejects.toThrow(/weight sync: engine e \(http:\/\/127\.0\.0\.1:\d+\) unreachable loading version 1: fetch failed: /);
    expect(e.loads).toEqual([1, 1]);
  });
});
