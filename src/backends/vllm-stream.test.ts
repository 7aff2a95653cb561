import { describe, expect, it } from "vitest";
import { BackendHttpError, BackendProtocolError, type TokenDelta } from "./backend.js";
import { completionTokenStream } from "./vllm-stream.js";

async function* events(list: readonly unknown[]): AsyncGenerator<string> {
  for (const e of list) yield typeof e === "string" ? e : JSON.stringify(e);
}

const chunk = (choice: object, extra: object = {}): object => ({ id: "cmpl-1", object: "text_completion", choices: [{ index: 0, text: "", ...choice }], ...extra });

async function read(list: readonly unknown[], opts: { policyVersion?: boolean; stopTokenIds?: number[] } = {}): Promise<{ deltas: TokenDelta[]; stream: ReturnType<typeof completionTokenStream> }> {
  const stream = completionTokenStream(events(list), { name: "e", url: "http://e/v1", policyVersion: opts.policyVersion ?? false, ...(opts.stopTokenIds ? { stopTokenIds: opts.stopTokenIds } : {}) });
  const deltas: TokenDelta[] = [];
  for await (const d of stream.deltas) deltas.push(d);
  return { deltas, stream };
}

describe("completionTokenStream", () => {
  it("yields each chunk's ids and logprobs and ends with the whole result", async () => {
    const { deltas, stream } = await read(
      [
        chunk({ prompt_token_ids: [1, 2], token_ids: [7], logprobs: { token_logprobs: [-0.5] }, finish_reason: null }, { policy_version: 3 }),
        chunk({ token_ids: [8, 9], logprobs: { token_logprobs: [-1, -2] }, finish_reason: "length" }, { policy_version: 3 }),
        { id: "cmpl-1", choices: [], usage: { prompt_tokens: 2 } },
        "[DONE]",
      ],
      { policyVersion: true },
    );
    expect(deltas).toEqual([
      { ids: [7], logprobs: [-0.5], policyVersion: 3 },
      { ids: [8, 9], logprobs: [-1, -2], policyVersion: 3 },
    ]);
    expect(stream.result()).toEqual({ outputTokenIds: [7, 8, 9], logprobs: [-0.5, -1, -2], finishReason: "length", policyVersion: 3, promptTokenIds: [1, 2] });
  });

  it("gives per-token versions when the engine switched weights mid-stream (chunk versions or token_policy_versions)", async () => {
    const { stream } = await read(
      [
        chunk({ prompt_token_ids: [1], token_ids: [7], logprobs: { token_logprobs: [-0.5] }, finish_reason: null }, { policy_version: 1 }),
        chunk({ token_ids: [8, 9], logprobs: { token_logprobs: [-1, -2] }, token_policy_versions: [1, 2], finish_reason: null }, { policy_version: 2 }),
        chunk({ token_ids: [0, 4], logprobs: { token_logprobs: [-1, -2] }, finish_reason: "length" }, { policy_version: 3 }),
        "[DONE]",
      ],
      { policyVersion: true, stopTokenIds: [0] },
    );
    expect(stream.result()).toEqual({
      outputTokenIds: [7, 8, 9, 0],
      logprobs: [-0.5, -1, -2, -1],
      finishReason: "stop",
      policyVersion: 3,
      promptTokenIds: [1],
      tokenPolicyVersions: [1, 1, 2, 3],
    });
    const bad = [chunk({ prompt_token_ids: [1], token_ids: [7, 8], logprobs: { token_logprobs: [-1, -1] }, token_policy_versions: [1] }, { policy_version: 1 })];
    await expect(read(bad, { policyVersion: true })).rejects.toThrow(/token_policy_versions/);
  });

  it("ends at the first stop token the engine did not honour", async () => {
    const { deltas, stream } = await read(
      [chunk({ prompt_token_ids: [1], token_ids: [5, 0, 6], logprobs: { token_logprobs: [-1, -2, -3] }, finish_reason: null }), chunk({ token_ids: [7], logprobs: { token_logprobs: [-1] } })],
      { stopTokenIds: [0] },
    );
    expect(deltas.map((d) => d.ids)).toEqual([[5, 0]]);
    expect(stream.result()).toMatchObject({ outputTokenIds: [5, 0], logprobs: [-1, -2], finishReason: "stop", policyVersion: null });
  });

  it("refuses to hand out the result before the stream ended", () => {
    const stream = completionTokenStream(events([]), { name: "e", url: "u", policyVersion: false });
    expect(() => stream.result()).toThrow(BackendProtocolError);
  });

  it("an engine error event, a missing [DONE], token ids or finish_reason fail the stream", async () => {
    const first = chunk({ prompt_token_ids: [1], token_ids: [5], logprobs: { token_logprobs: [-1] }, finish_reason: null });
    await expect(read([first, { error: { message: "boom", code: 500 } }, "[DONE]"])).rejects.toThrow(BackendHttpError);
    await expect(read([first])).rejects.toThrow(/without \[DONE\]/);
    await expect(read([first, "[DONE]"])).rejects.toThrow(/no finish_reason/);
    await expect(read([chunk({ prompt_token_ids: [1], finish_reason: null, token_ids: null, text: "x" }), "not json"])).rejects.toThrow(/not JSON/);
    await expect(read([chunk({ prompt_token_ids: [1], token_ids: [5], logprobs: { token_logprobs: [] } })])).rejects.toThrow(/1 output tokens/);
    await expect(read([chunk({ token_ids: [5], logprobs: { token_logprobs: [-1] }, finish_reason: "stop" }), "[DONE]"])).rejects.toThrow(/prompt_token_ids/);
    await expect(read([chunk({ prompt_token_ids: [1], token_ids: [5], logprobs: { token_logprobs: [-1] }, finish_reason: "stop" }), "[DONE]"], { policyVersion: true })).rejects.toThrow(/policy_version/);
  });
});
