// Ending a program (released by the orchestrator or idle): dropping what the gateway keeps for it
// and telling the onProgramTerminated hook once.
import { programForgotten } from "./call-path.js";
import type { GatewayContext } from "./gateway-context.js";
import type { ReleaseReason } from "./gateway-metrics.js";

export interface ProgramRelease {
  /** Drop everything the gateway keeps for a released program besides its table tombstone. */
  forget(id: string): void;
  /** Count a termination and run the hook; a failing hook must not break the gateway. */
  terminated(id: string, reason: ReleaseReason): void;
}

/** The release steps of the gateway `ctx`, with its `onTerminated` hook (GatewayOptions.onProgramTerminated). */
export function programRelease(
  ctx: GatewayContext,
  onTerminated: ((programId: string, reason: ReleaseReason) => void | Promise<void>) | undefined,
): ProgramRelease {
  return {
    forget(id) {
      programForgotten(ctx, id);
      ctx.contexts.delete(id);
      ctx.keys.release(id);
      ctx.limiter.forget(id);
    },
    terminated(id, reason) {
      ctx.metrics.released.inc({ reason });
      if (!onTerminated) return;
      const report = (e: unknown): void => {
        process.stderr.write(`gateway: onProgramTerminated('${id}', ${reason}) failed: ${e instanceof Error ? e.message : String(e)}\n`);
      };
      try {
        const ran = onTerminated(id, reason);
        if (ran instanceof Promise) ran.catch(report);
      } catch (e) {
        report(e);
      }
    },
  };
}
