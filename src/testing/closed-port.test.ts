import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { closedPort } from "./closed-port.js";

describe("closedPort", () => {
  it("gives a port below the ephemeral range that refuses connections", async () => {
    const port = await closedPort();
    const low = process.platform === "linux" ? Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) : 32768;
    expect(port).toBeLessThan(low);
    expect(port).toBeGreaterThan(1024);
    const code = await new Promise<string | undefined>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(undefined);
      });
      s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code));
    });
    expect(code).toBe("ECONNREFUSED");
  });
});
