// The run's trackers as a run starts them: a server that refuses the run is named with the config field and URL.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { realClock } from "../core/real-clock.js";
import { startTrackingSinks } from "./run-tracking.js";

describe("startTrackingSinks", () => {
  // A tracking server that refuses every request (a wrong token, say): 403.
  const server = createServer((_req, res) => res.writeHead(403, { "content-type": "application/json" }).end('{"error_code":"PERMISSION_DENIED","message":"no"}'));
  let url = "";
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it("names tracking.mlflow and its server when the MLflow run cannot start", async () => {
    const cfg = parseRunConfig({ engines: [{ name: "e0" }], tracking: { mlflow: { url } } });
    await expect(startTrackingSinks(cfg, "run-1", realClock, () => {})).rejects.toThrow(new RegExp(`^tracking\\.mlflow: cannot start tracking at ${url}: MLflow GET experiments/get-by-name: 403`));
  });

  it("names tracking.wandb and its server when the W&B run cannot start", async () => {
    const before = process.env.WANDB_API_KEY;
    process.env.WANDB_API_KEY = "k".repeat(40);
    try {
      const cfg = parseRunConfig({ engines: [{ name: "e0" }], tracking: { wandb: { project: "p", entity: "e", baseUrl: url } } });
      await expect(startTrackingSinks(cfg, "run-1", realClock, () => {})).rejects.toThrow(new RegExp(`^tracking\\.wandb: cannot start tracking at ${url}: .*403`));
    } finally {
      if (before === undefined) delete process.env.WANDB_API_KEY;
      else process.env.WANDB_API_KEY = before;
    }
  });
});
