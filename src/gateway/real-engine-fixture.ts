// Test fixture: the gateway in front of one real built-in engine running a tiny policy on llama.cpp,
// recording calls in memory. Shared by the tests that drive the gateway with real client SDKs.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Call } from "../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { ensurePolicy } from "../model/policy.js";
import { createGateway, type Gateway } from "./server.js";

export interface RealEngineGateway {
  engine: ListeningEngineServer;
  gateway: Gateway;
  /** Gateway origin, e.g. http://127.0.0.1:41234. */
  url: string;
  /** Every call the gateway recorded, in order. */
  calls: Call[];
  close(): Promise<void>;
}

/** Start a tiny-policy engine (2 sequences, 1024 tokens) and a gateway routing to it. */
export async function startRealEngineGateway(policyVersion: number): Promise<RealEngineGateway> {
  const policy = ensurePolicy(mkdtempSync(join(tmpdir(), "arbor-gw-engine-")), {
    seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024,
  });
  const engine = await startEngineServer({ name: "e0", modelPath: policy.path, policyVersion, sequences: 2, contextSize: 1024, maxWaiting: 8 });
  const calls: Call[] = [];
  const gateway = createGateway({ backends: [createBuiltinBackend({ name: "e0", url: `${engine.url}/v1` })], sink: { recordCall: (c) => calls.push(c) } });
  const url = await gateway.listen("127.0.0.1", 0);
  return {
    engine,
    gateway,
    url,
    calls,
    async close() {
      await gateway.close();
      await engine.close();
    },
  };
}
