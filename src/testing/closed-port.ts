// A loopback port that nothing listens on, for tests of an unreachable backend. A port the OS gave out and
// took back (listen on 0, then close) is in its ephemeral range, where a server that another test worker
// starts on port 0 can be given it before the test connects: the test then reaches that server (a 400 where
// it expected ECONNREFUSED). This one is taken just below the ephemeral range, which no server started on
// port 0 is given nor `freePort` draws, and checked by connecting (never by listening, which another worker
// could reach).
import { connect } from "node:net";
import { CLOSED_PORT_SPAN, ephemeralLow } from "../core/free-port.js";

/** How many ports are tried before giving up. */
const TRIES = 20;

/** Whether connecting to 127.0.0.1:`port` is refused (nothing listens there). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"));
  });
}

/** A port on 127.0.0.1 that refuses connections now and is never handed out to a server started on port 0. */
export async function closedPort(): Promise<number> {
  const low = Math.max(ephemeralLow(), CLOSED_PORT_SPAN + 1024);
  for (let i = 0; i < TRIES; i++) {
    // Spread by process, so parallel test workers start from different ports.
    const port = low - 1 - ((process.pid * 7919 + i * 104_729) % CLOSED_PORT_SPAN);
    if (await refused(port)) return port;
  }
  throw new Error(`closedPort: ${TRIES} ports below ${low} all accepted connections`);
}
