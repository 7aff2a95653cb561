// Tests of reading a completion answer's echoed prompt from the request: the very value a full parse gives,
// and a full parse wherever the answer holds anything but the ids exactly as sent.
import { describe, expect, it } from "vitest";
import { echoingPayload, readEchoing } from "./prompt-echo.js";

const ids = [151644, 8948, 0, 7, 2100, 151645];
const answer = (choice: object, top: object = {}) =>
  JSON.stringify({ id: "cmpl-1", object: "text_completion", choices: [{ index: 0, text: "hi", token_ids: [5, 6], logprobs: { token_logprobs: [-1, -0.5] }, finish_reason: "length", ...choice }], ...top });

describe("echoingPayload", () => {
  it("is the JSON of the body with the prompt first, and the echo holds the ids as the payload does", () => {
    const rest = { max_tokens: 16, temperature: 0.7, logprobs: 0, return_token_ids: true, stream: false, stop_token_ids: [2] };
    const { payload, idsJson } = echoingPayload(ids, JSON.stringify(rest));
    expect(payload).toBe(JSON.stringify({ prompt: ids, ...rest }));
    expect(idsJson).toBe(JSON.stringify(ids));
    expect(echoingPayload([1], "{}").payload).toBe('{"prompt":[1]}');
  });
});

describe("readEchoing", () => {
  const { idsJson } = echoingPayload(ids, "{}");

  it("gives what JSON.parse gives, the echoed ids a copy of the request's", () => {
    for (const text of [answer({ prompt_token_ids: ids }), answer({}, { prompt_token_ids: ids })]) {
      const json = readEchoing(text, idsJson, ids) as { choices: { prompt_token_ids?: number[] }[]; prompt_token_ids?: number[] };
      expect(json).toEqual(JSON.parse(text));
      const echoed = json.choices[0]!.prompt_token_ids ?? json.prompt_token_ids;
      expect(echoed).toEqual(ids);
      expect(echoed).not.toBe(ids);
    }
  });

  it("leaves to a full parse an answer that holds anything but the ids exactly as sent", () => {
    const spaced = answer({}).replace('"index":0', `"prompt_token_ids":[${ids.join(", ")}],"index":0`);
    expect(JSON.parse(spaced).choices[0].prompt_token_ids).toEqual(ids);
    expect(readEchoing(spaced, idsJson, ids)).toBeUndefined();
    expect(readEchoing(answer({ prompt_token_ids: [...ids, 9] }), idsJson, ids)).toBeUndefined();
    expect(readEchoing(answer({ prompt_token_ids: ids.slice(1) }), idsJson, ids)).toBeUndefined();
    // The key elsewhere than the choice or the top level, or quoted inside a string: not the echo.
    expect(readEchoing(answer({ kv_transfer_params: { prompt_token_ids: ids } }), idsJson, ids)).toBeUndefined();
    expect(readEchoing(answer({ text: `"prompt_token_ids":${JSON.stringify(ids)}` }), idsJson, ids)).toBeUndefined();
    // The same ids first under another key: left to the full parse too.
    expect(readEchoing(answer({ token_ids: ids, prompt_token_ids: ids }), idsJson, ids)).toBeUndefined();
    // Not JSON around it: the caller's full parse reports it.
    expect(readEchoing(`${answer({ prompt_token_ids: ids })}}`, idsJson, ids)).toBeUndefined();
  });
});
