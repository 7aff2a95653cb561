// The summary's cache counters of engines reached by URL: read from their /metrics at the start and at the end.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { countersSince, engineEndpoints, metricsEngines, remoteCacheStats } from "./engine-cache-stats.js";

/** An engine whose /metrics page serves vLLM's counters at the values `counters` holds when asked. */
async function metricsServer(counters: { queries: number; hits: number; preemptions: number } | null): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.url !== "/metrics" || counters === null) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(
      [
        "# TYPE vllm:prefix_cache_queries_total counter",
        `vllm:prefix_cache_queries_total{model_name="m"} ${counters.queries}`,
        "# TYPE vllm:prefix_cache_hits_total counter",
        `vllm:prefix_cache_hits_total{model_name="m"} ${counters.hits}`,
        "# TYPE vllm:num_preemptions_total counter",
        `vllm:num_preemptions_total{model_name="m"} ${counters.preemptions}`,
        "",
      ].join("\n"),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

describe("engine cache counters over a run", () => {
  it("count what each engine added since the start; one without the counters, or unreachable, is left out", async () => {
    const a = { queries: 1000, hits: 900, preemptions: 2 };
    const b = { queries: 50, hits: 0, preemptions: 0 };
    const ea = await metricsServer(a);
    const eb = await metricsServer(b);
    const none = await metricsServer(null);
    servers.push(ea.server, eb.server, none.server);
    const stats = await remoteCacheStats([
      { name: "a", url: ea.url },
      { name: "b", url: eb.url },
      { name: "sglang", url: none.url },
      { name: "dead", url: "http://127.0.0.1:1" },
    ]);
    Object.assign(a, { queries: 1600, hits: 1400, preemptions: 3 });
    Object.assign(b, { queries: 450, hits: 300 });
    expect(await stats()).toEqual({ queries: 600 + 400, hits: 500 + 300, preemptions: 1 });
  });

  it("count a counter that went down (a restarted engine) from zero, and nothing without engines", async () => {
    const start = new Map([["a", { queries: 1000, hits: 900, preemptions: 4 }]]);
    expect(countersSince(start, new Map([["a", { queries: 300, hits: 200, preemptions: 0 }]]))).toEqual({ queries: 300, hits: 200, preemptions: 0 });
    // An engine that answered only at the end has no start to count from.
    expect(countersSince(new Map(), new Map([["a", { queries: 300, hits: 200, preemptions: 0 }]]))).toEqual({ queries: 0, hits: 0, preemptions: 0 });
    expect(await (await remoteCacheStats([]))()).toEqual({ queries: 0, hits: 0, preemptions: 0 });
  });

  it("read vLLM and Arbor engines reached by URL (their server root), not in-process ones or other kinds", () => {
    expect(
      metricsEngines([
        { name: "v", type: "vllm", url: "http://v:8000/v1" },
        { name: "e0", type: "builtin", url: "http://engine:8101/v1/" },
        { name: "local", type: "builtin" },
        { name: "s", type: "sglang", url: "http://s:30000/v1" },
        { name: "o", type: "openai", url: "https://api.example.com/v1" },
      ] as never),
    ).toEqual([
      { name: "v", url: "http://v:8000" },
      { name: "e0", url: "http://engine:8101" },
    ]);
  });

  it("give the dashboard the held engines and those reached by URL, each once", () => {
    const held = [{ name: "e0", url: "http://engine:8101", inFlight: "finish" }];
    const backends = [
      { name: "e0", type: "builtin", url: "http://engine:8101/v1" },
      { name: "v", type: "vllm", url: "http://v:8000/v1" },
    ] as never;
    expect(engineEndpoints(held, backends)).toEqual([
      { name: "e0", url: "http://engine:8101" },
      { name: "v", url: "http://v:8000" },
    ]);
  });
});
