import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CLOSED_PORT_SPAN, ephemeralLow, freePort } from "./free-port.js";

const held: Server[] = [];
afterEach(async () => {
  await Promise.all(held.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Listen on `port` and keep it. */
async function hold(port: number): Promise<void> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(port, "127.0.0.1", resolve));
  held.push(s);
}

/** The port freePort's draw maps `x` in [0, 1) to. */
function drawn(x: number): number {
  const high = ephemeralLow() - CLOSED_PORT_SPAN;
  const low = Math.max(1024, high - 16384);
  return low + Math.floor(x * (high - low));
}

/** A draw giving the ports `xs` map to in turn, then `rest`'s. */
function at(xs: number[], rest = 0.9): (low: number, high: number) => number {
  return (lo, hi) => lo + Math.floor((xs.shift() ?? rest) * (hi - lo));
}

describe("freePort", () => {
  it("gives ports below the ephemeral range and the closed ports' span that bind, never the same one twice", async () => {
    const ports = [];
    // Draws kept to the lowest tenth of the span, away from the ports the other cases draw.
    for (let i = 0; i < 40; i++) ports.push(await freePort("127.0.0.1", (lo, hi) => lo + Math.floor(Math.random() * 0.1 * (hi - lo))));
    expect(new Set(ports).size).toBe(40);
    for (const p of ports) expect(p).toBeLessThan(ephemeralLow() - CLOSED_PORT_SPAN);
    for (const p of ports.slice(0, 5)) await hold(p);
  });

  it("skips a port something listens on, and one it gave before", async () => {
    const taken = drawn(0.25);
    await hold(taken);
    const draws = [0.25, 0.5, 0.5, 0.75];
    const first = await freePort("127.0.0.1", at(draws));
    expect(first).toBe(drawn(0.5));
    // 0.5 again is a port this process was given: the next draw is used.
    expect(await freePort("127.0.0.1", at(draws))).toBe(drawn(0.75));
  });

  it("fails, naming the range, when every try hits a taken port", async () => {
    await hold(drawn(0.125));
    await expect(freePort("127.0.0.1", at([], 0.125))).rejects.toThrow(/no free port on 127.0.0.1 in \d+-\d+ after 200 tries/);
  });

  it("reads the ephemeral range's low end, with Linux's default where it cannot", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-free-port-"));
    writeFileSync(join(dir, "range"), "40000\t60999\n");
    expect(ephemeralLow(join(dir, "range"))).toBe(40000);
    expect(ephemeralLow(join(dir, "missing"))).toBe(32768);
    writeFileSync(join(dir, "bad"), "x y\n");
    expect(ephemeralLow(join(dir, "bad"))).toBe(32768);
  });
});
