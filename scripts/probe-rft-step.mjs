// Probe (issue 20): K optimizer steps on one exported RL batch's solved samples (advantage 1 or the batch's own
// positive GRPO advantages, sample-mean weights: what `positiveOnly` trains on), and what they do to
//   - the log-likelihood of those samples (train), of the next batch's solved and unsolved samples (other tasks),
//   - mean P(golden) over 400 calc tasks never trained on (scripts/probe-golden.mjs: tracks the solved rate at T=1).
// Variants: Adam at each lr from a fresh state (as a run's first steps), "adam-warm" (linear warm-up over 8
// steps), or plain SGD along the clipped gradient. NEG=s in the environment adds A's unsolved programs at −s.
// Needs a run directory with batch-it1.jsonl, batch-it2.jsonl and store.sqlite, exported WITHOUT positiveOnly
// (e.g. `arbor run examples/learn-calc.yaml --set iterations=2 --set env.tasks=32 --set train.lr=0.00001
// --set train.estimatorOptions.positiveOnly=false --set train.estimatorOptions.zeroAdvantageUnsolvedGroups=false`
// with eval removed), and `npm run build`.
//   node scripts/probe-rft-step.mjs RUN_DIR [model.gguf] ['[["adam",1e-4],["sgd",0.1]]'] [K] [uniform|grpo]
import Database from "better-sqlite3";
import * as tf from "@tensorflow/tfjs";
const D = new URL("../dist/", import.meta.url).href;
const { readSamplesJsonl } = await import(D + "batch/export-jsonl.js");
const { buildTreeBatch } = await import(D + "batch/tree/tree-batch.js");
const { lossWeights } = await import(D + "batch/estimators/estimator.js");
const { createGrpo } = await import(D + "batch/estimators/grpo.js");
const { Trainer } = await import(D + "trainer/trainer.js");
const { sftSplit, sftTree } = await import(D + "sft/sft.js");
// The golden trajectories of 400 tasks never trained on: mean P(golden) tracks the solved rate at T=1.
const golden = sftTree(sftSplit({ env: "calc", tasks: 400, taskSeed: 424242, evalTasks: 0 }).train);
function pGolden(tr) {
  const lp = tr.logprobs(golden);
  const s = new Float64Array(400);
  golden.terms.sample.forEach((k, j) => (s[k] += lp[j]));
  return (100 * s.reduce((a, x) => a + Math.exp(x), 0) / 400).toFixed(2) + "%";
}
const dir = process.argv[2];
const db = new Database(dir + "/store.sqlite", { readonly: true });
const outcome = new Map(db.prepare("select program_id, components from rewards").all().map((r) => [r.program_id, JSON.parse(r.components).outcome]));
db.close();
const loss = createGrpo().loss;
// mode "uniform": advantage 1 on every solved sample; "grpo": the batch's own GRPO advantages, positive part
// (what positiveOnly trains on; the batch must have been exported without positiveOnly).
const mode = process.argv[6] ?? "uniform";
const asPositive = (ss) => {
  const w = lossWeights(ss, loss);
  return ss.map((s, i) => ({ ...s, advantages: mode === "grpo" ? s.advantages.map((a) => Math.max(a, 0)) : s.lossMask.map((m) => m), weights: w[i] }));
};
async function sets(file) {
  const all = await readSamplesJsonl(dir + "/" + file);
  const solved = all.filter((s) => outcome.get(s.programId) >= 1);
  const wrong = all.filter((s) => !(outcome.get(s.programId) >= 1));
  return { solved: asPositive(solved), wrong: asPositive(wrong) };
}
const A = await sets("batch-it1.jsonl");
const B = await sets("batch-it2.jsonl");
console.log(`A solved ${A.solved.length} wrong ${A.wrong.length}; B solved ${B.solved.length} wrong ${B.wrong.length}`);
const trees = { Asol: buildTreeBatch(A.solved, loss), Bsol: buildTreeBatch(B.solved, loss), Bwrong: buildTreeBatch(B.wrong, loss) };
function perSample(tr, tb) {
  const lp = tr.logprobs(tb.tree);
  const n = Math.max(...tb.tree.terms.sample) + 1;
  const s = new Float64Array(n);
  tb.tree.terms.sample.forEach((k, j) => (s[k] += lp[j]));
  return s;
}
const model = process.argv[3] ?? "/work/wt/i20-recipe/models/calc-solver.gguf";
const variants = JSON.parse(process.argv[4] ?? '[["adam",1e-4],["adam",3e-4],["adam",1e-3],["sgd",0.03],["sgd",0.1],["sgd",0.3]]');
const steps = Number(process.argv[5] ?? 1);
const base = await Trainer.fromGguf(model, { lr: 1e-3 });
console.log(`P(golden) before ${pGolden(base)}`);
const before = Object.fromEntries(Object.entries(trees).map(([k, tb]) => [k, perSample(base, tb)]));
base.dispose();
// NEG=s (env): also train on A's unsolved programs with advantage −s (sample-mean weights over all of A).
const neg = Number(process.env.NEG ?? 0);
const trained = neg > 0
  ? (() => {
      const all = [...A.solved, ...A.wrong.map((x) => ({ ...x, advantages: x.lossMask.map((m) => -neg * m) }))];
      const w = lossWeights(all, loss);
      return buildTreeBatch(all.map((x, i) => ({ ...x, weights: w[i] })), loss);
    })()
  : trees.Asol;
const batch = { tree: trained.tree, termUnit: trained.termUnit, loss };
for (const [opt, lr] of variants) {
  const tr = await Trainer.fromGguf(model, { lr, maxGradNorm: 1 });
  for (let k = 0; k < steps; k++) {
    if (opt === "adam") tr.step(batch);
    // "adam-warm": the rate rises linearly to lr over the first 8 steps (a warm-up), then stays.
    else if (opt === "adam-warm") tr.step(batch, { lrAt: (n) => (lr * Math.min(n, 8)) / 8 });
    else {
      const { grads } = tr.gradients(batch);
      let sq = 0;
      for (const g of grads.values()) for (const x of g) sq += x * x;
      const norm = Math.sqrt(sq), scale = Math.min(1, 1 / norm);
      for (const [name, g] of grads) {
        const v = tr.model.param(name);
        const nv = tf.tidy(() => tf.sub(v, tf.mul(tf.tensor(g, v.shape), lr * scale)));
        v.assign(nv); nv.dispose();
      }
      if (k === 0) process.stdout.write(`  (grad norm ${norm.toFixed(3)}) `);
    }
  }
  const row = Object.entries(trees).map(([k, tb]) => {
    const a = perSample(tr, tb), b = before[k];
    let d = 0, up = 0;
    for (let i = 0; i < a.length; i++) { d += a[i] - b[i]; if (a[i] > b[i]) up++; }
    // mean per-sample probability change too (the solved-probability proxy)
    let pb = 0, pa = 0;
    for (let i = 0; i < a.length; i++) { pb += Math.exp(b[i]); pa += Math.exp(a[i]); }
    return `${k}: Δlogp ${(d / a.length).toFixed(3)} up ${up}/${a.length} meanP ${(pb / a.length).toFixed(3)}→${(pa / a.length).toFixed(3)}`;
  });
  console.log(`${opt} lr ${lr} ×${steps}: P(golden) ${pGolden(tr)} | ${row.join(" | ")}`);
  tr.dispose();
}
