// `arbor hf export` / `arbor hf convert` end to end through the real command: the tiny policy out to a
// Hugging Face directory and back to a GGUF with the same tensors, and bad input as one error line.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { readGguf, writeGgufRaw } from "../model/gguf.js";
import { ensurePolicy } from "../model/policy.js";
import { hfExportCommand } from "./hf.js";

const root = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "arbor-cli-hf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const arbor = (...args: string[]) => spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { encoding: "utf8", timeout: 120_000 });

describe("arbor hf", () => {
  it("exports the tiny policy and converts it back to the same tensors", () => {
    const policy = ensurePolicy(dir, { seed: 2, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 32, contextLength: 128 });
    const ex = arbor("hf", "export", policy.path, join(dir, "hf"));
    expect(ex.stderr).toBe("");
    expect(ex.status).toBe(0);
    expect(ex.stdout).toContain(`→ ${join(dir, "hf")}`);
    expect(ex.stdout).toContain("config.json (12 tensors, F32)");
    const out = join(dir, "out", "back.gguf");
    const cv = arbor("hf", "convert", join(dir, "hf"), out);
    expect(cv.stderr).toBe("");
    expect(cv.status).toBe(0);
    expect(cv.stdout).toContain("architecture llama, 12 tensors (from 12 F32, written F32), vocabulary 361 (llama)");
    const a = readGguf(policy.path).tensors;
    const b = readGguf(out).tensors;
    expect(b.map((t) => t.name)).toEqual(a.map((t) => t.name));
    a.forEach((t, i) => expect(Buffer.from(b[i]!.data.buffer).equals(Buffer.from(t.data.buffer))).toBe(true));
  });

  it("prints one error line naming the file for bad input", () => {
    const r = arbor("hf", "convert", join(dir, "missing-dir"), join(dir, "x.gguf"));
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(`arbor: error: ${join(dir, "missing-dir")}: not a directory (a Hugging Face checkpoint is a directory with config.json)`);
    // In-process (each spawn of the command costs seconds): the same ArborError the command prints.
    expect(() => hfExportCommand(join(dir, "nope.gguf"), join(dir, "y"))).toThrow(`${join(dir, "nope.gguf")}: no such file`);
    const qwen = join(dir, "qwen.gguf");
    writeGgufRaw(qwen, [["general.architecture", { type: "string", value: "qwen2" }]], []);
    expect(() => hfExportCommand(qwen, join(dir, "y"))).toThrow(ArborError);
    expect(() => hfExportCommand(qwen, join(dir, "y"))).toThrow(`${qwen}: GGUF architecture 'qwen2' is not supported here`);
  });
});
