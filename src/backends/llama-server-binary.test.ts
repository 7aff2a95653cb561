// Where Arbor looks for llama-server: $ARBOR_LLAMA_SERVER, else the path scripts/build-llama-server.sh
// builds into (keyed by the sha256 of the bundled llama.cpp source).
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findLlamaServer } from "./llama-server-binary.js";

describe("findLlamaServer", () => {
  let dir = "";
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const tempDir = () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-find-llama-"));
    dirs.push(dir);
    return dir;
  };

  function repoWithBundle(content: string): string {
    tempDir();
    const llama = join(dir, "repo/node_modules/node-llama-cpp/llama");
    mkdirSync(llama, { recursive: true });
    writeFileSync(join(llama, "gitRelease.bundle"), content);
    return join(dir, "repo");
  }

  it("finds the build script's binary under $ARBOR_CACHE, keyed by the bundle's sha256", () => {
    const repo = repoWithBundle("bundle v1");
    const cache = join(dir, "cache");
    const sha = createHash("sha256").update("bundle v1").digest("hex").slice(0, 16);
    const bin = join(cache, "llama-server", sha, "llama-server");
    expect(findLlamaServer(repo, { ARBOR_CACHE: cache })).toEqual({ missing: expect.stringContaining(`no llama-server at ${bin}`) });
    mkdirSync(join(cache, "llama-server", sha), { recursive: true });
    writeFileSync(bin, "#!/bin/sh\n");
    chmodSync(bin, 0o755);
    expect(findLlamaServer(repo, { ARBOR_CACHE: cache })).toEqual({ path: bin });
    // Another bundle (another llama.cpp) is another cache entry.
    expect(findLlamaServer(repoWithBundle("bundle v2"), { ARBOR_CACHE: cache })).toHaveProperty("missing");
  });

  it("prefers $ARBOR_LLAMA_SERVER and says when it is not executable", () => {
    const repo = repoWithBundle("b");
    const bin = join(dir, "my-llama-server");
    writeFileSync(bin, "#!/bin/sh\n");
    expect(findLlamaServer(repo, { ARBOR_LLAMA_SERVER: bin })).toEqual({ missing: `ARBOR_LLAMA_SERVER=${bin} is not an executable file` });
    chmodSync(bin, 0o755);
    expect(findLlamaServer(repo, { ARBOR_LLAMA_SERVER: bin })).toEqual({ path: bin });
  });

  it("says so when node-llama-cpp's source bundle is absent", () => {
    expect(findLlamaServer(tempDir(), {})).toEqual({ missing: expect.stringContaining("no llama.cpp source bundle") });
  });
});
