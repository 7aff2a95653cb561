import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { startTcpFaultProxy, type TcpFaultProxy } from "./tcp-fault-proxy.js";

// An echo server: what a client sends comes back.
async function startEcho(): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

/** Connect to the proxy; resolves with the socket and a promise of how it ended ("close" or the error code). */
function open(port: number): { socket: Socket; ended: Promise<string> } {
  const socket = connect({ host: "127.0.0.1", port });
  const ended = new Promise<string>((resolve) => {
    let code = "close";
    socket.on("error", (e: NodeJS.ErrnoException) => (code = e.code ?? e.message));
    socket.on("close", () => resolve(code));
  });
  return { socket, ended };
}

/** Send `text` and read the same number of bytes back. */
function echo(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const onData = (b: Buffer): void => {
      got += b.toString("utf8");
      if (got.length >= text.length) {
        socket.off("data", onData);
        resolve(got);
      }
    };
    socket.on("data", onData);
    socket.write(text);
  });
}

describe("tcp fault proxy", () => {
  let echoServer: Awaited<ReturnType<typeof startEcho>>;
  let proxy: TcpFaultProxy;
  let clock: VirtualClock;

  beforeEach(async () => {
    echoServer = await startEcho();
    clock = new VirtualClock(1000);
    proxy = await startTcpFaultProxy("127.0.0.1", echoServer.port, clock);
  });
  afterEach(async () => {
    await proxy.close();
    for (const s of echoServer.sockets) s.destroy();
    await new Promise<void>((r) => echoServer.server.close(() => r()));
  });

  it("forwards bytes both ways by default", async () => {
    const a = open(proxy.port);
    expect(await echo(a.socket, "hello through the proxy")).toBe("hello through the proxy");
    expect(proxy.connectionsForwarded).toBe(1);
    expect(proxy.open).toBe(1);
    a.socket.end();
    await a.ended;
  });

  it("cut destroys every open connection, refuses new ones for the outage, then forwards again", async () => {
    const a = open(proxy.port);
    const b = open(proxy.port);
    await echo(a.socket, "a");
    await echo(b.socket, "b");
    expect(proxy.open).toBe(2);

    let resumed = false;
    const back = proxy.cut(3000).then(() => (resumed = true));
    expect(proxy.isCut).toBe(true);
    // Both clients see their connection broken (reset, as by a broken link).
    expect(await a.ended).toBe("ECONNRESET");
    expect(await b.ended).toBe("ECONNRESET");
    expect(proxy.connectionsCut).toBe(2);
    expect(proxy.open).toBe(0);

    // During the outage a new connection is accepted and dropped at once, never reaching the server.
    const refused = open(proxy.port);
    refused.socket.write("lost");
    expect(["ECONNRESET", "close", "EPIPE"]).toContain(await refused.ended);
    expect(proxy.connectionsRefused).toBe(1);
    expect(proxy.connectionsForwarded).toBe(2);

    // A second, shorter cut while cut does not shorten the outage.
    void proxy.cut(1000);
    clock.advance(2999);
    expect(proxy.isCut).toBe(true);
    expect(resumed).toBe(false);
    clock.advance(1);
    await back;
    expect(proxy.isCut).toBe(false);

    const c = open(proxy.port);
    expect(await echo(c.socket, "after the outage")).toBe("after the outage");
    expect(proxy.connectionsForwarded).toBe(3);
    c.socket.end();
    await c.ended;
  });

  it("a longer cut while cut extends the outage, and a bad duration is refused", async () => {
    const first = proxy.cut(1000);
    const second = proxy.cut(5000);
    expect(first).toBe(second);
    clock.advance(1000);
    expect(proxy.isCut).toBe(true);
    clock.advance(4000);
    await second;
    expect(proxy.isCut).toBe(false);
    expect(() => proxy.cut(-1)).toThrow("cut: ms must be a finite number >= 0, got -1");
  });
});
