// The roles an engine serves (docs/architecture.md, "Prefill/decode disaggregation"), apart from the KV
// hand-off that implements them, so that `arbor serve engine --role` is checked without loading it.

/** `mixed`: whole requests; `prefill` / `decode`: one half of a request, handing its KV over a pool. */
export type EngineRole = "prefill" | "decode" | "mixed";

/** Every role, in the order error messages list them. */
export const ENGINE_ROLES: readonly EngineRole[] = ["prefill", "decode", "mixed"];
