// The policy versions of a program's tokens, read from its recorded calls, as the orchestrator's
// run-length spans. A call's tokens are at its `tokenPolicyVersions` where the gateway recorded them
// (the engine switched weights mid-call), else all at its `policyVersion`.
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
    const per = c.tokenPolicyVersions;
    if (per === undefined || per.length !== n) {
      inverted += add(spans, c.policyVersion - base, n);
      continue;
    }
    // Runs of equal versions within the call, each added as one piece.
    for (let i = 0; i < n; ) {
      let j = i + 1;
      while (j < n && per[j] === per[i]) j++;
      inverted += add(spans, (per[i] as number) - base, j - i);
      i = j;
    }
  }
  return { spans, inverted };
}

/** Append `n` tokens at version `v` to `spans`; returns how many were inverted (counted at the newer span's version). */
function add(spans: VersionSpan[], v: number, n: number): number {
  const last = spans[spans.length - 1];
  let inverted = 0;
  if (last !== undefined && v < last.version) {
    inverted = n;
    v = last.version;
  }
  if (last !== undefined && last.version === v) last.tokens += n;
  else spans.push({ version: v, tokens: n });
  return inverted;
}
