import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider } from "./bwrap.js";
import { containerSpec } from "./docker-spec.js";
import { podSpec } from "./k8s-spec.js";
import { checkReadOnlyMounts, MAX_READ_ONLY_MOUNTS } from "./read-only-mounts.js";
import { createSandboxProvider } from "./registry.js";

let dir: string;
let install: string;
const providers: BwrapProvider[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-ro-mounts-"));
  chmodSync(dir, 0o755);
  install = join(dir, "install");
  mkdirSync(join(install, "bin"), { recursive: true, mode: 0o755 });
  writeFileSync(join(install, "bin", "agent.mjs"), 'console.log("agent ran from", import.meta.url)\n', { mode: 0o644 });
});

afterAll(async () => {
  for (const p of providers) await p.destroyAll();
  rmSync(dir, { recursive: true, force: true });
});

describe("checkReadOnlyMounts", () => {
  it("normalizes a good mount", () => {
    expect(checkReadOnlyMounts([{ hostPath: install, sandboxPath: "/opt/agent/" }], { onThisHost: true })).toEqual([{ hostPath: install, sandboxPath: "/opt/agent" }]);
  });

  it.each([
    [{ hostPath: "/x", sandboxPath: "opt/agent" }, /sandboxPath must be an absolute path/],
    [{ hostPath: "/x", sandboxPath: "/" }, /must not be the root/],
    [{ hostPath: "/x", sandboxPath: "/workspace/agent" }, /overlaps \/workspace/],
    [{ hostPath: "/x", sandboxPath: "/usr/local/agent" }, /overlaps \/usr/],
    [{ hostPath: "relative", sandboxPath: "/opt/agent" }, /hostPath must be an absolute path/],
  ])("refuses %j, naming the field", (m, why) => {
    expect(() => checkReadOnlyMounts([m], { onThisHost: false })).toThrow(why);
    expect(() => checkReadOnlyMounts([m], { onThisHost: false })).toThrow(/readOnlyMounts\[0\]/);
  });

  it("refuses a missing host folder, a file, a path mounted twice and too many mounts", () => {
    expect(() => checkReadOnlyMounts([{ hostPath: join(dir, "nope"), sandboxPath: "/opt/a" }], { onThisHost: true })).toThrow(/does not exist/);
    expect(() => checkReadOnlyMounts([{ hostPath: join(install, "bin", "agent.mjs"), sandboxPath: "/opt/a" }], { onThisHost: true })).toThrow(/is not a folder/);
    // The k8s provider's folders are on the nodes: a path missing here is not an error there.
    expect(checkReadOnlyMounts([{ hostPath: join(dir, "nope"), sandboxPath: "/opt/a" }], { onThisHost: false })).toHaveLength(1);
    const twice = [
      { hostPath: install, sandboxPath: "/opt/a" },
      { hostPath: install, sandboxPath: "/opt/a/" },
    ];
    expect(() => checkReadOnlyMounts(twice, { onThisHost: true })).toThrow(/readOnlyMounts\[1\]\.sandboxPath '\/opt\/a' is mounted twice/);
    const many = Array.from({ length: MAX_READ_ONLY_MOUNTS + 1 }, (_, i) => ({ hostPath: install, sandboxPath: `/opt/m${i}` }));
    expect(() => checkReadOnlyMounts(many, { onThisHost: false })).toThrow(/at most 8/);
  });

  it("refuses a folder the sandbox uid cannot read", () => {
    const hidden = join(dir, "hidden");
    mkdirSync(join(hidden, "inner"), { recursive: true });
    chmodSync(hidden, 0o700);
    expect(() => checkReadOnlyMounts([{ hostPath: join(hidden, "inner"), sandboxPath: "/opt/a" }], { onThisHost: true, uid: 65534 })).toThrow(
      /not readable by the sandbox uid 65534: .*hidden lacks x/,
    );
  });
});

describe("bwrap: a read-only mount in every sandbox", () => {
  it("runs what the mount holds, refuses writes to it, and copies nothing into the workspace", async () => {
    const p = createSandboxProvider("bwrap", {
      root: join(dir, "sb"),
      limits: { cpuSeconds: 10, memoryMb: 4096, wallMs: 20_000 },
      readOnlyMounts: [{ hostPath: install, sandboxPath: "/opt/agent" }],
    }) as BwrapProvider;
    providers.push(p);
    for (const id of ["p-1", "p-2"]) {
      const sb = await p.create(id);
      const ran = await sb.exec(["/usr/bin/node", "/opt/agent/bin/agent.mjs"]);
      expect(ran.stdout.trim()).toBe("agent ran from file:///opt/agent/bin/agent.mjs");
      const write = await sb.exec(["/bin/sh", "-c", "echo x > /opt/agent/bin/new.txt; echo x >> /opt/agent/bin/agent.mjs"]);
      expect(write.exitCode).not.toBe(0);
      expect(write.stderr).toMatch(/Read-only file system/);
      expect(readdirSync(sb.hostWorkspace, { recursive: true })).toEqual([]);
      await sb.destroy();
    }
    expect(readdirSync(join(install, "bin"))).toEqual(["agent.mjs"]);
  }, 60_000);

  it("refuses a bad mount when the provider is made", () => {
    expect(() => createBwrapProvider({ root: join(dir, "sb2"), limits: { cpuSeconds: 1, memoryMb: 256, wallMs: 1000 }, readOnlyMounts: [{ hostPath: join(dir, "nope"), sandboxPath: "/opt/agent" }] })).toThrow(
      /readOnlyMounts\[0\]\.hostPath .*nope does not exist/,
    );
    expect(existsSync(join(dir, "sb2"))).toBe(false);
  });
});

describe("docker and k8s: read-only volumes in the specs", () => {
  const mounts = [{ hostPath: "/srv/agents/qwen", sandboxPath: "/opt/agent" }];

  it("docker binds the folder read-only beside the workspace", () => {
    const spec = containerSpec({ image: "img", programId: "p", hostWorkspace: "/ws", user: "65534:65534", memoryMb: 1, cpus: 1, cpuSeconds: 1, maxProcesses: 1, maxFileMb: 1, tmpSizeMb: 1, ownerPid: 1, readOnlyMounts: mounts });
    expect(spec.HostConfig?.Binds).toEqual(["/ws:/workspace:rw", "/srv/agents/qwen:/opt/agent:ro"]);
    expect(spec.HostConfig?.ReadonlyRootfs).toBe(true);
  });

  it("k8s mounts a hostPath Directory volume read-only", () => {
    const pod = podSpec({ name: "p", programId: "p", image: "img", uid: 65534, cpus: 1, memoryMb: 1, workspaceMb: 1, tmpSizeMb: 1, readOnlyMounts: mounts });
    expect(pod.spec?.containers[0]?.volumeMounts).toContainEqual({ name: "ro-0", mountPath: "/opt/agent", readOnly: true });
    expect(pod.spec?.volumes).toContainEqual({ name: "ro-0", hostPath: { path: "/srv/agents/qwen", type: "Directory" } });
    const plain = podSpec({ name: "p", programId: "p", image: "img", uid: 65534, cpus: 1, memoryMb: 1, workspaceMb: 1, tmpSizeMb: 1 });
    expect(plain.spec?.volumes?.map((v) => v.name)).toEqual(["workspace", "tmp"]);
  });
});
