// The k8s provider: the shared contract suite against a real cluster (skipped, with the reason,
// where none is reachable), and the request mapping against fakes at the client boundary.
import type { Readable, Writable } from "node:stream";
import type { V1NetworkPolicy, V1Pod, V1Status } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import { EXEC_KILL_GRACE_MS } from "./docker-k8s-shared.js";
import { describeSandboxContract, waitFor } from "./sandbox.contract.js";
import { createK8sProvider, k8sAvailable, type K8sClients } from "./k8s.js";
import { exitCodeOf, labelValue } from "./k8s-spec.js";
import type { SandboxLimits } from "./sandbox.js";

const cluster = await k8sAvailable();
describeSandboxContract("k8s", (limits) => createK8sProvider({ limits }), {
  skipReason: cluster.ok ? undefined : cluster.message,
  local: false,
});

interface Reply {
  stdout?: string;
  stderr?: string;
  exitCode: number;
  hang?: boolean;
  /** With hang: the kill misses a process that holds the exec's socket open (only closing the socket ends it). */
  orphan?: boolean;
}

const status = (code: number): V1Status =>
  code === 0
    ? { status: "Success" }
    : { status: "Failure", reason: "NonZeroExitCode", details: { causes: [{ reason: "ExitCode", message: String(code) }] } };

/** Fake API server + exec endpoint: records every call; pods run after `pendingReads` reads. */
function fakeCluster(o: { pendingReads?: number; waiting?: string } = {}) {
  const calls: string[] = [];
  const pods = new Map<string, V1Pod>();
  const policies: V1NetworkPolicy[] = [];
  const execs: { pod: string; container: string; cmd: string[]; stdin: string; killed: boolean }[] = [];
  const open = new Map<number, () => void>();
  const orphans = new Set<number>();
  let reads = 0;
  let handler: (cmd: string[], stdin: string) => Reply = () => ({ exitCode: 0 });
  const clients: K8sClients = {
    core: {
      async createNamespacedPod({ namespace, body }) {
        calls.push(`createPod ${namespace}/${body.metadata?.name}`);
        pods.set(body.metadata!.name!, body);
        return body;
      },
      async readNamespacedPod({ name }) {
        reads++;
        const pod = pods.get(name)!;
        if (o.waiting) {
          return { ...pod, status: { phase: "Pending", containerStatuses: [{ name: "sandbox", ready: false, image: "", imageID: "", restartCount: 0, state: { waiting: { reason: o.waiting, message: "pull access denied" } } }] } };
        }
        const running = reads > (o.pendingReads ?? 0);
        return { ...pod, status: { phase: running ? "Running" : "Pending", containerStatuses: [{ name: "sandbox", ready: running, image: "", imageID: "", restartCount: 0 }] } };
      },
      async deleteNamespacedPod({ name, namespace, gracePeriodSeconds }) {
        calls.push(`deletePod ${namespace}/${name} grace=${gracePeriodSeconds}`);
        if (!pods.delete(name)) throw Object.assign(new Error("not found"), { code: 404 });
        for (const end of open.values()) end();
        return {};
      },
    },
    networking: {
      async createNamespacedNetworkPolicy({ namespace, body }) {
        calls.push(`createPolicy ${namespace}/${body.metadata?.name}`);
        policies.push(body);
        return body;
      },
      async deleteNamespacedNetworkPolicy({ name, namespace }) {
        calls.push(`deletePolicy ${namespace}/${name}`);
        return {};
      },
    },
    exec: {
      async exec(_ns: string, pod: string, container: string, cmd: string[], stdout: Writable | null, stderr: Writable | null, stdin: Readable | null, _tty: boolean, cb?: (s: V1Status) => void) {
        let input = "";
        for await (const chunk of stdin ?? []) input += Buffer.from(chunk as Uint8Array).toString("utf8");
        const rec = { pod, container, cmd, stdin: input, killed: false };
        execs.push(rec);
        const i = execs.length;
        if (cmd[2]?.includes("kill -KILL")) {
          const victim = execs.findIndex((e) => e.cmd.includes(`ARBOR_EXEC=${cmd[3]}`));
          if (victim >= 0) {
            execs[victim]!.killed = true;
            if (!orphans.has(victim + 1)) open.get(victim + 1)?.();
          }
        }
        const r = handler(cmd, input);
        if (r.orphan) orphans.add(i);
        const socket = { close: () => open.get(i)?.() };
        if (r.hang) {
          open.set(i, () => {
            open.delete(i);
            cb?.(status(137));
          });
          return socket;
        }
        if (r.stdout) stdout?.write(r.stdout);
        if (r.stderr) stderr?.write(r.stderr);
        setImmediate(() => cb?.(status(r.exitCode)));
        return socket;
      },
    },
  };
  return { clients, calls, pods, policies, execs, setHandler: (h: typeof handler) => (handler = h), podCount: () => pods.size };
}

const LIMITS: SandboxLimits = { cpuSeconds: 3, memoryMb: 128, wallMs: 1000 };

describe("k8s provider request mapping (fake cluster)", () => {
  it("creates a deny-all network policy and a locked-down pod, then waits until it runs", async () => {
    const f = fakeCluster({ pendingReads: 1 });
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock: realClock, namespace: "rl", image: "arbor/sb:1", workspaceMb: 64, tmpSizeMb: 16, cpus: 0.5 });
    const sb = await p.create("Prog_1/x");
    const name = f.calls[0]!.split("/")[1]!;
    expect(name).toMatch(/^arbor-prog-1-x-/);
    expect(f.calls).toEqual([`createPolicy rl/${name}`, `createPod rl/${name}`]);
    expect(f.policies[0]!.spec).toEqual({ podSelector: { matchLabels: { "arbor.pod": name } }, policyTypes: ["Ingress", "Egress"], ingress: [], egress: [] });
    const pod = f.pods.get(name)!;
    expect(pod.metadata?.labels).toMatchObject({ "arbor.pod": name, "arbor.program": "Prog_1_x" });
    expect(pod.spec).toMatchObject({
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: { runAsUser: 65534, runAsNonRoot: true },
      volumes: [
        { name: "workspace", emptyDir: { sizeLimit: "64Mi" } },
        { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } },
      ],
    });
    expect(pod.spec?.containers[0]).toMatchObject({
      image: "arbor/sb:1",
      command: ["sleep", "infinity"],
      resources: { limits: { cpu: "0.5", memory: "128Mi", "ephemeral-storage": "80Mi" } },
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    });
    expect(sb.hostWorkspace).toBe(`k8s://rl/${name}/workspace`);
    await p.destroyAll();
  });

  it("maps exec to the exec API with limits, cwd, env and stdin, and the status to an exit code", async () => {
    const f = fakeCluster();
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock: realClock, maxFileMb: 1 });
    f.setHandler((cmd, stdin) => (cmd.at(-1) === "segv" ? { exitCode: 139 } : { stdout: `in:${stdin}`, stderr: "e\n", exitCode: 2 }));
    const sb = await p.create("prog");
    const r = await sb.exec(["cat"], { stdin: "abc", cwd: "d", env: { FOO: "bar" } });
    expect(r).toMatchObject({ exitCode: 2, signal: null, stdout: "in:abc", stderr: "e\n", timedOut: false });
    const cmd = f.execs[0]!.cmd;
    expect(f.execs[0]!.container).toBe("sandbox");
    expect(cmd.slice(0, 2)).toEqual(["env", "-i"]);
    expect(cmd).toContain("FOO=bar");
    expect(cmd).toContain("ARBOR_EXEC=1");
    expect(cmd.find((a) => a.startsWith("ulimit"))).toMatch(/^ulimit -t 3 && ulimit -f 2048 && /);
    expect(cmd.slice(-3)).toEqual(["arbor-exec", "/workspace/d", "cat"]);
    expect(await sb.exec(["segv"])).toMatchObject({ exitCode: null, signal: "SIGSEGV" });
    // Too big to start anywhere: refused before the cluster sees it, naming the limit.
    const execs = f.execs.length;
    const big = await sb.exec(["true"], { env: { BIG: "a".repeat(3_000_000) } });
    expect(big).toMatchObject({ exitCode: 126, limit: "arguments", stderr: expect.stringMatching(/env BIG is 3000004 bytes, over/) });
    expect(f.execs.length).toBe(execs);
    expect(exitCodeOf(undefined)).toBeNull();
    await p.destroyAll();
  });

  it("writes files through exec with the data on stdin and keeps paths inside the workspace", async () => {
    const f = fakeCluster();
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock: realClock });
    const sb = await p.create("prog");
    await sb.writeFile("a/b.txt", "payload");
    const w = f.execs.at(-1)!;
    expect(w.cmd.slice(-1)).toEqual(["/workspace/a/b.txt"]);
    expect(w.stdin).toBe("payload");
    await expect(sb.writeFile("../x", "y")).rejects.toThrow(/must stay inside the workspace/);
    f.setHandler(() => ({ exitCode: 1, stderr: "cat: /workspace/a: Is a directory" }));
    await expect(sb.writeFile("a", "y")).rejects.toThrow(/cannot write 'a': cat: \/workspace\/a: Is a directory/);
    await p.destroyAll();
  });

  it("kills the exec's process tree at the wall-clock limit", async () => {
    const f = fakeCluster();
    const clock = new VirtualClock();
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock });
    f.setHandler((cmd) => (cmd.at(-1) === "300" ? { exitCode: 0, hang: true } : { exitCode: 0 }));
    const sb = await p.create("prog");
    const run = sb.exec(["sleep", "300"]);
    await waitFor(() => f.execs.length === 1);
    clock.advance(1000);
    const r = await run;
    expect(r).toMatchObject({ timedOut: true, signal: "SIGKILL", limit: "wall" });
    expect(f.execs[0]!.killed).toBe(true);
    await p.destroyAll();
  });

  it("ends an exec killed at its wall-clock limit after a grace period, closing a socket a process the kill missed holds open", async () => {
    const f = fakeCluster();
    const clock = new VirtualClock();
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock });
    f.setHandler((cmd) => (cmd.at(-1) === "300" ? { exitCode: 0, hang: true, orphan: true } : { exitCode: 0 }));
    const sb = await p.create("prog");
    const run = sb.exec(["sleep", "300"]);
    let settled = false;
    void run.then(() => (settled = true));
    await waitFor(() => f.execs.length === 1);
    clock.advance(1000);
    await waitFor(() => f.execs[0]!.killed);
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    clock.advance(EXEC_KILL_GRACE_MS);
    expect(await run).toMatchObject({ timedOut: true, signal: "SIGKILL", limit: "wall" });
    await p.destroyAll();
  });

  it("destroy deletes pod (no grace) and policy once, tolerates a vanished pod, and ends running execs", async () => {
    const f = fakeCluster();
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock: realClock, namespace: "ns" });
    f.setHandler(() => ({ exitCode: 0, hang: true }));
    const sb = await p.create("prog");
    const run = sb.exec(["sleep", "300"]);
    await waitFor(() => f.execs.length === 1);
    await Promise.all([sb.destroy(), sb.destroy()]);
    expect(f.calls.filter((c) => c.startsWith("delete"))).toEqual([expect.stringMatching(/^deletePod ns\/arbor-prog-.* grace=0$/), expect.stringMatching(/^deletePolicy ns\//)]);
    expect((await run).signal).toBe("SIGKILL");
    expect(f.podCount()).toBe(0);
    await expect(sb.exec(["true"])).rejects.toThrow(/is destroyed/);
    expect(p.liveCount).toBe(0);
  });

  it("fails fast on an image that cannot be pulled and deletes what it created", async () => {
    const f = fakeCluster({ waiting: "ImagePullBackOff" });
    const p = createK8sProvider({ limits: LIMITS, clients: f.clients, clock: realClock, image: "nope:1" });
    await expect(p.create("prog")).rejects.toThrow(/did not start: phase Pending, ImagePullBackOff: pull access denied/);
    expect(f.podCount()).toBe(0);
    expect(f.calls.some((c) => c.startsWith("deletePolicy"))).toBe(true);
    expect(p.liveCount).toBe(0);
    expect(labelValue("--a/b--")).toBe("a_b");
  });
});

describe("the Kubernetes client on this Node", () => {
  it("loads and reaches its HTTP stack (a dependency that needs a newer Node would throw here)", async () => {
    const k8s = await import("@kubernetes/client-node");
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://127.0.0.1:1" }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const api = kc.makeApiClient(k8s.CoreV1Api);
    await expect(api.readNamespacedPod({ name: "p", namespace: "default" })).rejects.toThrow(/ECONNREFUSED/);
  });
});
