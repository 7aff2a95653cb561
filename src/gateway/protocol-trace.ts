// A trace the engine's answer does not fit is the engine's fault: reported as its protocol error.
import { BackendProtocolError, type Backend } from "../backends/backend.js";
import { TraceShapeError } from "./trace-extract.js";

/** Run `read` (a trace extraction); a TraceShapeError becomes a BackendProtocolError naming `backend`. */
export function readTrace<T>(backend: Backend, read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof TraceShapeError) throw new BackendProtocolError(backend.name, backend.url, e.message);
    throw e;
  }
}
