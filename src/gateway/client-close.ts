// Cancelling work for a client that went away (an agent killed mid-call must not keep the engine
// generating for nobody), and the bounds every upstream call shares: the call timeout and the client.
import type { ServerResponse } from "node:http";
import type { GatewayContext } from "./gateway-context.js";
import { CallTimeoutError, ClientClosedError } from "./http-errors.js";

/** Abort `ac` with ClientClosedError if `res` closes before it finished; returns the detach function. */
export function abortOnClientClose(res: ServerResponse, ac: AbortController): () => void {
  const onClose = (): void => {
    if (!res.writableFinished) ac.abort(new ClientClosedError());
  };
  res.once("close", onClose);
  return () => res.off("close", onClose);
}

/** One upstream call's signal and the function that releases its timer and listener. */
export interface BoundedCall {
  controller: AbortController;
  signal: AbortSignal;
  done(): void;
}

/**
 * Bound a call to `backend` by the gateway's call timeout (CallTimeoutError) and by the client behind `res`
 * staying connected (ClientClosedError; at once if it already left, as between a re-routed call's attempts).
 * `done` must run when the call ends, however it ends.
 */
export function boundedCall(ctx: Pick<GatewayContext, "clock" | "callTimeoutMs">, backend: string, res: ServerResponse): BoundedCall {
  const controller = new AbortController();
  const timer = ctx.clock.setTimer(ctx.callTimeoutMs, () => controller.abort(new CallTimeoutError(backend, ctx.callTimeoutMs)));
  if (res.closed && !res.writableFinished) controller.abort(new ClientClosedError());
  const detach = abortOnClientClose(res, controller);
  return {
    controller,
    signal: controller.signal,
    done: () => {
      timer.cancel();
      detach();
    },
  };
}
