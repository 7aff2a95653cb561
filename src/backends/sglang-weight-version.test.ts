// SGLang reports the weight version that produced an answer (meta_info.weight_version, which Arbor's weight
// sync sets to the policy version): the adapter records it, and no version where the server names its own.
import { afterEach, describe, expect, it } from "vitest";
import { startFixtureServer, type FixtureServer } from "../testing/fixture-server.js";
import { createSglangBackend } from "./sglang.js";

describe("sglang weight version", () => {
  let server: FixtureServer | undefined;
  afterEach(async () => {
    await server?.close();
  });

  async function versionOf(weightVersion: unknown): Promise<number | null> {
    server = await startFixtureServer((r) =>
      r.path === "/generate"
        ? { json: { text: "hi", output_ids: [7], meta_info: { id: "r", finish_reason: { type: "stop" }, weight_version: weightVersion, output_token_logprobs: [[-0.5, 7, null]] } } }
        : undefined,
    );
    const r = await createSglangBackend({ name: "sg", url: server.root }).generate({ promptTokenIds: [1, 2], maxTokens: 4, temperature: 1 });
    await server.close();
    server = undefined;
    return r.policyVersion;
  }

  it("records the version Arbor's weight sync set, and none for the server's default or a name of its own", async () => {
    expect(await versionOf("3")).toBe(3);
    expect(await versionOf("default")).toBeNull();
    expect(await versionOf("v2-rc")).toBeNull();
    expect(await versionOf(undefined)).toBeNull();
  });
});
