// Cancelling work for a client that went away: an agent killed mid-call must not keep the engine
// generating for nobody.
import type { ServerResponse } from "node:http";
import { ClientClosedError } from "./http-errors.js";

/** Abort `ac` with ClientClosedError if `res` closes before it finished; returns the detach function. */
export function abortOnClientClose(res: ServerResponse, ac: AbortController): () => void {
  const onClose = (): void => {
    if (!res.writableFinished) ac.abort(new ClientClosedError());
  };
  res.once("close", onClose);
  return () => res.off("close", onClose);
}
