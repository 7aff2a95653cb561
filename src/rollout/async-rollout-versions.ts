// The policy versions of a program's tokens, read from its recorded calls, as the orchestrator's
// run-length spans. The gateway records one `policyVersion` per call (the version of the call's
// last tokens: the engine's `policy_version`), not the engine's per-token `token_policy_versions`,
// so every output token of a call is counted at its call's version.
import type { Call } from "../core/types.js";
import type { VersionSpan } from "./orchestrator/orchestrator.js";

export interface CallVersionSpans {
  /** Versions (minus `base`) of the output tokens in call order, run-length encoded, never decreasing. */
  spans: VersionSpan[];
  /**
   * Output tokens of calls made at a version older than an earlier call's (an engine that had not
   * loaded the new weights yet while another had): the orchestrator's record cannot go back in
   * version, so they are counted in the newer span; the calls themselves keep their true version.
   */
  inverted: number;
}

/** Spans of the output tokens of `calls` (in call order), with versions relative to `base`. */
export function callVersionSpans(calls: readonly Call[], base: number): CallVersionSpans {
  const spans: VersionSpan[] = [];
  let inverted = 0;
  for (const c of [...calls].sort((a, b) => a.index - b.index)) {
    const n = c.outputTokenIds.length;
    if (n === 0) continue;
    const last = spans[spans.length - 1];
    let v = c.policyVersion - base;
    if (last !== undefined && v < last.version) {
      inverted += n;
      v = last.version;
    }
    if (last !== undefined && last.version === v) last.tokens += n;
    else spans.push({ version: v, tokens: n });
  }
  return { spans, inverted };
}
