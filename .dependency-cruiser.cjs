// Arbor's layer order, checked by dependency-cruiser in `npm run lint` (docs/architecture.md, "Layers").
// Each folder of src/ imports only from the folders of lower layers, and folders of one layer do not import
// each other. Test support lives in src/testing/ and only tests import it; every production module is
// reachable from the `arbor` command; no module imports another in a circle. Tests (x.test.ts), contract
// suites (x.contract.ts) and src/testing/ may import any layer: they are not part of the product's graph.
// src/testing/layer-rules.test.ts checks that each rule fires.
"use strict";

/** Bottom to top. A folder may import from any folder of a lower layer. */
const LAYERS = [
  ["core"],
  ["model"],
  ["engine", "backends", "store", "sandbox", "broker"],
  ["batch", "gateway"],
  ["trainer", "agents"],
  ["envs"],
  ["reward"],
  ["rollout", "validate", "sft"],
  ["loop"],
  ["sim"],
  ["bench"],
  ["cli"],
];

/**
 * Production modules no command reaches yet, each named with the reason: a library surface for users'
 * trainers, or a simulation of an engine role that does not exist yet. Everything else must be reachable.
 */
const NOT_YET_WIRED = [
  // The tree-attention metadata external kernels consume (docs/batch-schema.md): a library for Python/Megatron
  // trainers. (Tree batches as safetensors are wired: the trainer protocol serves them.)
  "^src/batch/tree/attention\\.ts$",
  // Prefill/decode disaggregation at scale on the cost model (the engines serve the roles for real:
  // engine/http/kv-handoff.ts, and a backend `type: disagg` places calls on them: backends/disagg-backend.ts).
  "^src/sim/disagg/",
  // The in-process work queue and event bus on a Clock (the JetStream ones are wired: arbor serve worker,
  // trainer-api, run --cluster): for workers simulated on the virtual clock; the contract suites use them now.
  "^src/broker/memory-(work-queue|event-bus)\\.ts$",
];

/** Tests, contract suites and test support. */
const TEST_FILE = "(\\.test\\.ts$|\\.contract\\.ts$|^src/testing/)";

function layerRules() {
  const rules = [];
  LAYERS.forEach((layer, rank) => {
    for (const folder of layer) {
      const notAllowed = LAYERS.slice(rank + 1)
        .flat()
        .concat(layer.filter((peer) => peer !== folder));
      if (notAllowed.length === 0) continue;
      rules.push({
        name: `layer-${folder}`,
        comment: `src/${folder}/ may import only from lower layers: ${LAYERS.slice(0, rank).flat().join(", ") || "none"}.`,
        severity: "error",
        from: { path: `^src/${folder}/`, pathNot: TEST_FILE },
        to: { path: `^src/(${notAllowed.join("|")})/` },
      });
    }
  });
  return rules;
}

module.exports = {
  forbidden: [
    ...layerRules(),
    {
      name: "no-circular",
      comment: "Modules must not import each other in a circle.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "testing-only-from-tests",
      comment: "src/testing/ is test support: production code never imports it.",
      severity: "error",
      from: { path: "^src/", pathNot: TEST_FILE },
      to: { path: "^src/testing/" },
    },
    {
      name: "no-tests-from-production",
      comment: "Production code never imports a test or a contract suite.",
      severity: "error",
      from: { path: "^src/", pathNot: TEST_FILE },
      to: { path: "(\\.test\\.ts$|\\.contract\\.ts$)" },
    },
    {
      name: "no-production-code-only-for-tests",
      comment:
        "Every production module is reachable from the arbor command (src/cli/main.ts); code only tests use belongs in src/testing/.",
      severity: "error",
      from: { path: "^src/cli/main\\.ts$" },
      // src/index.ts is the package's other entry point (the library API: package.json `exports`); what it
      // exports must still be reachable from the command.
      to: { path: "^src/.*\\.ts$", pathNot: [TEST_FILE, "\\.d\\.ts$", "^src/index\\.ts$", ...NOT_YET_WIRED], reachable: false },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^node_modules|\\.arbor/|^src/envs/swe-mini/(tasks|vendor)/)" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".mjs", ".json"] },
  },
};
