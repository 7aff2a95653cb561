// The typed way for a tool (or hook) to end an episode with a specific termination: throw
// AgentStop("hygiene_violation", ...) and the loop records exactly that kind instead of a crash.
import type { TerminationKind } from "../core/types.js";

/** Thrown by a tool to end the episode with `kind` (e.g. a hygiene violation it detected). */
export class AgentStop extends Error {
  constructor(
    readonly kind: TerminationKind,
    readonly detail: string,
  ) {
    super(`${kind}: ${detail}`);
    this.name = "AgentStop";
  }
}
