// SGLang's KV capacity: the scheduler's sglang:max_total_num_tokens gauge (one pool per DP rank,
// repeated by every TP rank) when it is set, /get_server_info otherwise.
import { afterEach, describe, expect, it } from "vitest";
import { startFixtureServer, type FixtureServer } from "../testing/fixture-server.js";
import { createSglangBackend } from "./sglang.js";

const gauge = (labels: string, v: number) => `sglang:max_total_num_tokens{${labels}} ${v}`;

describe("sglang KV capacity", () => {
  let server: FixtureServer | undefined;
  afterEach(async () => {
    await server?.close();
  });

  async function capacity(metrics: string[]): Promise<number | null> {
    server = await startFixtureServer((r) => {
      if (r.path === "/metrics") return { text: ["# TYPE sglang:max_total_num_tokens gauge", ...metrics, ""].join("\n") };
      if (r.path === "/get_server_info") return { json: { max_total_num_tokens: 1000, internal_states: [{ max_total_num_tokens: 1000 }] } };
      return undefined;
    });
    return (await createSglangBackend({ name: "sg", url: server.root }).scrapeMetrics()).kvCapacityTokens;
  }

  it("sums the gauge over DP ranks, counting each DP rank's TP/PP replicas once", async () => {
    const cap = await capacity([
      gauge('dp_rank="0",pp_rank="0",tp_rank="0"', 5000),
      gauge('dp_rank="0",pp_rank="0",tp_rank="1"', 5000),
      gauge('dp_rank="1",pp_rank="0",tp_rank="0"', 7000),
      gauge('dp_rank="1",pp_rank="0",tp_rank="1"', 7000),
    ]);
    expect(cap).toBe(12000);
    expect(server!.requests.some((r) => r.path === "/get_server_info")).toBe(false);
  });

  it("falls back to /get_server_info while the gauge is unset (0) or absent", async () => {
    expect(await capacity([gauge('pp_rank="0",tp_rank="0"', 0)])).toBe(1000);
    await server!.close();
    expect(await capacity([])).toBe(1000);
  });
});
