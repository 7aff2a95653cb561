// Probe (issue 20): what sharpening alone is worth — the mean probability a checkpoint gives the golden calc
// trajectory (scripts/probe-golden.mjs) on N tasks never trained on, with its logits divided by each temperature T
// (the output norm's weights divided by T scale every logit by 1/T, exactly what sampling at T does).
//   node scripts/probe-temperature.mjs N model.gguf T1 [T2 ...]
const D = new URL("../dist/", import.meta.url).href;
const { sftSplit, sftTree } = await import(D + "sft/sft.js");
const { Trainer } = await import(D + "trainer/trainer.js");
const [nArg, path, ...temps] = process.argv.slice(2);
const { train } = sftSplit({ env: "calc", tasks: Number(nArg), taskSeed: 424242, evalTasks: 0 });
const tree = sftTree(train);
const tr = await Trainer.fromGguf(path);
const norm = tr.model.param("output_norm.weight");
const original = norm.clone();
for (const T of temps) {
  norm.assign(original.div(Number(T)));
  const lp = tr.logprobs(tree);
  const s = new Float64Array(train.length);
  tree.terms.sample.forEach((k, j) => (s[k] += lp[j]));
  let P = 0, L = 0;
  for (const x of s) { P += Math.exp(x); L += x; }
  console.log(`${path} T=${T}: mean P(golden) ${((100 * P) / s.length).toFixed(2)}%  mean log P ${(L / s.length).toFixed(3)}`);
}
original.dispose();
tr.dispose();
