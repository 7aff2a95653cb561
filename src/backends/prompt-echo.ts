// The prompt a completion answer echoes back. vLLM (and Arbor's engine) answer a completion asked with
// return_token_ids with the prompt's ids in `prompt_token_ids`: for an agent's call, thousands of ids the
// gateway itself just sent, whose parsing was most of an answer's JSON.parse (2,100 ids: 28 of its µs on the
// gateway's answer path). An answer that holds them exactly as they were sent is parsed with the array cut out
// and the ids put back from the request: the same value, read without parsing it. Anything else (another
// spacing, other ids, the key somewhere unexpected) is parsed whole, as before.

/** What stands for the cut-out array while the rest is parsed (no engine answers a prompt with this string). */
const SENTINEL = "\u0000arbor:echoed-prompt";
const SENTINEL_JSON = JSON.stringify(SENTINEL);

/** The key an echo follows. */
const KEY = '"prompt_token_ids":';

/** A request body with the prompt's ids first, and the ids' JSON as it holds them (what an echo repeats). */
export interface EchoingPayload {
  payload: string;
  idsJson: string;
}

/** The JSON of `{prompt: ids, ...rest}` built from `restJson` (the JSON of an object without `prompt`). */
export function echoingPayload(ids: readonly number[], restJson: string): EchoingPayload {
  const idsJson = JSON.stringify(ids);
  const payload = restJson === "{}" ? `{"prompt":${idsJson}}` : `{"prompt":${idsJson},${restJson.slice(1)}`;
  return { payload, idsJson };
}

/**
 * The answer `text` parsed, its `choices[0].prompt_token_ids` (or top-level `prompt_token_ids`) read from `ids`
 * when the text holds `"prompt_token_ids":` + `idsJson` there; undefined when it does not (the caller parses the
 * text whole). Inside a JSON string every quote is escaped, so `...ids":[...]` only matches a key and its whole array.
 */
export function readEchoing(text: string, idsJson: string, ids: readonly number[]): unknown {
  // The ids first, then the key before them: no copy of the ids' JSON with the key in front to search for.
  const at = text.indexOf(idsJson);
  if (at < KEY.length || !text.startsWith(KEY, at - KEY.length)) return undefined;
  let json: { prompt_token_ids?: unknown; choices?: { prompt_token_ids?: unknown }[] };
  try {
    json = JSON.parse(`${text.slice(0, at)}${SENTINEL_JSON}${text.slice(at + idsJson.length)}`);
  } catch {
    return undefined;
  }
  const choice = Array.isArray(json?.choices) ? json.choices[0] : undefined;
  if (typeof choice === "object" && choice !== null && choice.prompt_token_ids === SENTINEL) choice.prompt_token_ids = ids.slice();
  else if (typeof json === "object" && json !== null && json.prompt_token_ids === SENTINEL) json.prompt_token_ids = ids.slice();
  else return undefined;
  return json;
}
