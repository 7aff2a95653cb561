import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { checkPortsFree, runPorts } from "./check-ports.js";

const held: Server[] = [];
afterEach(async () => {
  for (const s of held.splice(0)) await new Promise((r) => s.close(r));
});

async function holdPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  held.push(s);
  return (s.address() as { port: number }).port;
}

describe("checkPortsFree", () => {
  it("names the gateway port in use at once", async () => {
    const port = await holdPort();
    const cfg = parseRunConfig({ gateway: { port }, engines: [{ name: "e0" }] });
    await expect(checkPortsFree(runPorts(cfg))).rejects.toThrow(`gateway.port: port ${port} on 127.0.0.1 is already in use`);
  });

  it("names an engine port in use and a port named twice", async () => {
    const port = await holdPort();
    const cfg = parseRunConfig({ engines: [{ name: "e0" }, { name: "e1", port }] });
    await expect(checkPortsFree(runPorts(cfg))).rejects.toThrow(`engines[1].port (engine 'e1'): port ${port} on 127.0.0.1 is already in use`);
    const twice = parseRunConfig({ gateway: { port: 40123 }, engines: [{ name: "e0", port: 40123 }] });
    await expect(checkPortsFree(runPorts(twice))).rejects.toThrow("engines[0].port (engine 'e0'): port 40123 is also gateway.port");
  });

  it("passes free and ephemeral (0) ports", async () => {
    const port = await holdPort();
    await new Promise((r) => held.pop()?.close(r));
    const cfg = parseRunConfig({ gateway: { port }, engines: [{ name: "e0" }] });
    expect(runPorts(cfg)).toEqual([{ what: "gateway.port", host: "127.0.0.1", port }]);
    await expect(checkPortsFree(runPorts(cfg))).resolves.toBeUndefined();
  });
});

describe("arbor run with a gateway port in use", () => {
  it("fails before loading any engine, naming the port", async () => {
    const { runIteration } = await import("./run.js");
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join(tmpdir(), "arbor-ports-"));
    try {
      const port = await holdPort();
      const cfg = parseRunConfig({ gateway: { port }, engines: [{ name: "e0" }], model: { path: join(dir, "missing.gguf") }, output: { dir } });
      // The model file does not exist: had anything loaded an engine first, the run would have failed on that.
      await expect(runIteration(cfg, { progress: false })).rejects.toThrow(`gateway.port: port ${port} on 127.0.0.1 is already in use`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
