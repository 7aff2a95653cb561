// Probe: the probability each checkpoint gives the golden calc trajectory (exact tool call, then `Answer: <n>`,
// with the real tool result) on N tasks never trained on: a deterministic lower bound on the solved rate at
// temperature 1, free of sampling noise, to compare policy versions cheaply.
//   node scripts/probe-golden.mjs [N] a.gguf b.gguf ...
const D = new URL("../dist/", import.meta.url).href;
const { sftSplit, sftTree } = await import(D + "sft/sft.js");
const { Trainer } = await import(D + "trainer/trainer.js");
const [nArg, ...paths] = process.argv.slice(2);
const { train } = sftSplit({ env: "calc", tasks: Number(nArg), taskSeed: 424242, evalTasks: 0 });
const tree = sftTree(train);
for (const p of paths) {
  const tr = await Trainer.fromGguf(p);
  const lp = tr.logprobs(tree);
  const s = new Float64Array(train.length);
  tree.terms.sample.forEach((k, j) => (s[k] += lp[j]));
  let P = 0, L = 0, P2 = 0;
  for (const x of s) { P += Math.exp(x); P2 += Math.exp(2 * x); L += x; }
  const n = s.length, m = P / n, se = Math.sqrt((P2 / n - m * m) / n);
  console.log(`${p}: mean P(golden) ${(100 * m).toFixed(2)}% ± ${(100 * se).toFixed(2)}  mean log P ${(L / n).toFixed(3)}`);
  tr.dispose();
}
