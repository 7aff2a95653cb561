// A checkpoint in the format each engine loads: detection, conversion both ways (once), errors naming the path.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readGguf } from "../gguf.js";
import { ensurePolicy } from "../policy.js";
import { checkpointAs, checkpointFormat, convertedPath } from "./checkpoint-formats.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-ckpt-formats-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const policy = ensurePolicy(dir, { seed: 3, nEmbd: 32, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 128 });

describe("checkpoint formats", () => {
  it("tells a GGUF file from an HF directory, and names a path that is neither", () => {
    expect(checkpointFormat(policy.path)).toBe("gguf");
    mkdirSync(join(dir, "empty"));
    expect(() => checkpointFormat(join(dir, "empty"))).toThrow(/empty: a directory without config.json is not a Hugging Face checkpoint/);
    expect(() => checkpointFormat(join(dir, "nope.gguf"))).toThrow(/nope.gguf: no such file or directory/);
  });

  it("converts GGUF → HF → GGUF next to the source, once, with the same weights", () => {
    const hf = checkpointAs(policy.path, "hf");
    expect(hf).toBe(`${policy.path}.hf`);
    expect(checkpointFormat(hf)).toBe("hf");
    expect(checkpointAs(policy.path, "gguf")).toBe(policy.path);
    const mtime = statSync(join(hf, "config.json")).mtimeMs;
    expect(checkpointAs(`${policy.path}`, "hf")).toBe(hf);
    expect(statSync(join(hf, "config.json")).mtimeMs).toBe(mtime); // reused, not rewritten
    const back = checkpointAs(`${hf}/`, "gguf");
    expect(back).toBe(`${policy.path}.hf.gguf`); // never the file it came from
    expect(readGguf(back).tensors.map((t) => t.data)).toEqual(readGguf(policy.path).tensors.map((t) => t.data));
  });

  it("converts an HF directory (a PyTorch trainer's output) to GGUF and redoes it when the source is newer", () => {
    const hf = join(dir, "policy-v1");
    checkpointAs(policy.path, "hf");
    mkdirSync(hf);
    for (const f of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]) {
      writeFileSync(join(hf, f), readFileSync(join(convertedPath(policy.path, "hf"), f)));
    }
    const gguf = checkpointAs(hf, "gguf");
    expect(gguf).toBe(`${hf}.gguf`);
    expect(readGguf(gguf).tensors.map((t) => t.name)).toEqual(readGguf(policy.path).tensors.map((t) => t.name));
    utimesSync(gguf, new Date(0), new Date(0));
    checkpointAs(hf, "gguf");
    expect(statSync(gguf).mtimeMs).toBeGreaterThan(0);
  });

  it("names the checkpoint and the reason when a conversion fails", () => {
    const bad = join(dir, "bad");
    mkdirSync(bad);
    writeFileSync(join(bad, "config.json"), "{}");
    expect(() => checkpointAs(bad, "gguf")).toThrow(/checkpoint .*bad: cannot convert it to GGUF: /);
  });
});
