import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INSTALL_MARKER, npmInstallDir, parseNpmSpec, resolveAgentInstall } from "./agent-install.js";

let dir: string;
/**
 * A stand-in for npm: records its arguments and environment, then installs `<name>@<version>` as a
 * package.json under <prefix>/node_modules — or fails, or hangs, as FAKE_NPM_MODE says (a file, since
 * the real npm's environment is passed through).
 */
let npm: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-agent-install-"));
  npm = join(dir, "fake-npm.mjs");
  writeFileSync(
    npm,
    `#!/usr/bin/env node
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
const args = process.argv.slice(2);
const mode = readFileSync(${JSON.stringify(join(dir, "mode"))}, "utf8").trim();
appendFileSync(${JSON.stringify(join(dir, "calls.jsonl"))}, JSON.stringify({ args, npmEnv: Object.keys(process.env).filter((k) => /^npm_/i.test(k)) }) + "\\n");
if (mode === "fail") { console.error("npm error 404 Not Found - GET https://registry.npmjs.org/nope"); process.exit(1); }
if (mode === "hang") { setInterval(() => {}, 1000); }
else {
  const prefix = args[args.indexOf("--prefix") + 1];
  const spec = args.at(-1);
  const at = spec.lastIndexOf("@");
  const pkg = join(prefix, "node_modules", spec.slice(0, at));
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: spec.slice(0, at), version: mode === "wrong" ? "0.0.1" : spec.slice(at + 1) }));
}
`,
  );
  chmodSync(npm, 0o755);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const mode = (m: string): void => writeFileSync(join(dir, "mode"), m);
const calls = (): { args: string[]; npmEnv: string[] }[] =>
  existsSync(join(dir, "calls.jsonl")) ? readFileSync(join(dir, "calls.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)) : [];

describe("parseNpmSpec", () => {
  it("reads a scoped or plain name with an exact version; anything else is not npm", () => {
    expect(parseNpmSpec("npm:@qwen-code/qwen-code@0.15.10")).toEqual({ name: "@qwen-code/qwen-code", version: "0.15.10" });
    expect(parseNpmSpec("npm:cowsay@1.6.0-beta.1")).toEqual({ name: "cowsay", version: "1.6.0-beta.1" });
    expect(parseNpmSpec("./agents/mine")).toBeUndefined();
  });

  it.each(["npm:cowsay", "npm:cowsay@latest", "npm:cowsay@^1.2.0", "npm:@scope@1.0.0", "npm:Bad Name@1.0.0"])("refuses %s, naming agent.install", (spec) => {
    expect(() => parseNpmSpec(spec)).toThrow(/^agent\.install: /);
  });
});

describe("resolveAgentInstall", () => {
  it("takes a folder as it is, relative to cwd; refuses a missing one or a file", async () => {
    mkdirSync(join(dir, "agents", "mine"), { recursive: true });
    await expect(resolveAgentInstall("agents/mine", { cacheDir: join(dir, "cache"), cwd: dir })).resolves.toEqual({ spec: "agents/mine", hostPath: join(dir, "agents", "mine"), installed: false });
    await expect(resolveAgentInstall("agents/none", { cacheDir: join(dir, "cache"), cwd: dir })).rejects.toThrow(/agent\.install: folder .*agents\/none does not exist/);
    await expect(resolveAgentInstall(npm, { cacheDir: join(dir, "cache") })).rejects.toThrow(/is not a folder/);
  });

  it("installs an npm package once into its cache folder, then reuses it", async () => {
    mode("ok");
    const cacheDir = join(dir, "cache-ok");
    const first = await resolveAgentInstall("npm:@acme/coder@1.2.3", { cacheDir, npm });
    expect(first).toEqual({ spec: "npm:@acme/coder@1.2.3", hostPath: npmInstallDir(cacheDir, "@acme/coder", "1.2.3"), npm: { name: "@acme/coder", version: "1.2.3" }, installed: true });
    expect(JSON.parse(readFileSync(join(first.hostPath, INSTALL_MARKER), "utf8"))).toMatchObject({ spec: "npm:@acme/coder@1.2.3" });
    const second = await resolveAgentInstall("npm:@acme/coder@1.2.3", { cacheDir, npm });
    expect(second).toEqual({ ...first, installed: false });
    expect(calls()).toHaveLength(1);
    const [call] = calls();
    // Optional (platform-native) dependencies included whatever the calling npm's settings say.
    expect(call!.args).toEqual(expect.arrayContaining(["install", "--prefix", "--include=optional", "@acme/coder@1.2.3"]));
    expect(call!.npmEnv).toEqual([]);
    // Only the finished folder is left: no partial install.
    expect(readdirSync(cacheDir)).toEqual([first.hostPath.slice(cacheDir.length + 1)]);
  });

  it("fails clearly when npm fails, installs another version, or runs past its time; leaves nothing", async () => {
    const cacheDir = join(dir, "cache-bad");
    mode("fail");
    await expect(resolveAgentInstall("npm:nope@1.0.0", { cacheDir, npm })).rejects.toThrow(/agent\.install: npm install of npm:nope@1\.0\.0 failed \(exit 1\): npm error 404 Not Found/);
    mode("wrong");
    await expect(resolveAgentInstall("npm:nope@1.0.0", { cacheDir, npm })).rejects.toThrow(/left version 0\.0\.1/);
    mode("hang");
    await expect(resolveAgentInstall("npm:nope@1.0.0", { cacheDir, npm, timeoutMs: 500 })).rejects.toThrow(/ran past 500 ms and was killed/);
    await expect(resolveAgentInstall("npm:nope@1.0.0", { cacheDir, npm: join(dir, "no-npm") })).rejects.toThrow(/cannot run .*no-npm/);
    expect(readdirSync(cacheDir)).toEqual([]);
  });
});
