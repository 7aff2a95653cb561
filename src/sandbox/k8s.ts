// The Kubernetes sandbox provider (@kubernetes/client-node): one pod per program in a configured
// namespace, a deny-all NetworkPolicy beside it, every command an exec through the API server,
// killed (its process tree) at the wall-clock limit, pod and policy deleted on destroy. The
// workspace lives in the pod (an emptyDir), so `hostWorkspace` is a k8s:// address, not a path.
// Limits: memory, CPU and ephemeral storage in the pod spec; CPU time and file size per process by
// ulimit in the exec prelude; the process cap is the kubelet's podPidsLimit (node configuration,
// not settable per pod); "no network" needs a CNI that enforces NetworkPolicy.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, posix } from "node:path";
import { Readable, type Writable } from "node:stream";
import type { V1NetworkPolicy, V1Pod, V1Status } from "@kubernetes/client-node";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { SANDBOX_WORKSPACE } from "./bwrap-args.js";
import { argumentsLimitResult, execSizeProblem } from "./exec-size.js";
import { checkLimits, counterGrowth, EXEC_KILL_GRACE_MS, LiveSandboxes, outputSink, positive, withinMs } from "./docker-k8s-shared.js";
import { countersSpec, parseCounters } from "./docker-spec.js";
import { exitCodeOf, execCommand, killCommand, networkPolicySpec, podSpec, SANDBOX_CONTAINER, writeCommand } from "./k8s-spec.js";
import { classifyLimit } from "./limit-flags.js";
import { checkReadOnlyMounts } from "./read-only-mounts.js";
import type { ExecOptions, ExecResult, ReadOnlyMount, Sandbox, SandboxLimits, SandboxProvider } from "./sandbox.js";
import { CappedOutput, decodeStatus } from "./sandbox-process.js";

/** The slice of CoreV1Api the provider uses (fakes implement just this). */
export interface K8sCoreLike {
  createNamespacedPod(p: { namespace: string; body: V1Pod }): Promise<V1Pod>;
  readNamespacedPod(p: { name: string; namespace: string }): Promise<V1Pod>;
  deleteNamespacedPod(p: { name: string; namespace: string; gracePeriodSeconds?: number }): Promise<unknown>;
}

/** The slice of NetworkingV1Api the provider uses. */
export interface K8sNetworkingLike {
  createNamespacedNetworkPolicy(p: { namespace: string; body: V1NetworkPolicy }): Promise<unknown>;
  deleteNamespacedNetworkPolicy(p: { name: string; namespace: string }): Promise<unknown>;
}

/** The exec call of the client's `Exec` class; resolves to the (closable) web socket. */
export interface K8sExecLike {
  exec(
    namespace: string,
    podName: string,
    containerName: string,
    command: string[],
    stdout: Writable | null,
    stderr: Writable | null,
    stdin: Readable | null,
    tty: boolean,
    statusCallback?: (status: V1Status) => void,
  ): Promise<{ close(): void }>;
}

export interface K8sClients {
  core: K8sCoreLike;
  networking: K8sNetworkingLike;
  exec: K8sExecLike;
}

export interface K8sProviderOptions {
  limits: SandboxLimits;
  clock?: Clock;
  /** Namespace of the pods (default "default"). */
  namespace?: string;
  /** Image of every sandbox (default debian:bookworm-slim); it needs /bin/sh, env, cat. */
  image?: string;
  /** Clients (default: from the default kubeconfig, see {@link k8sAvailable}). */
  clients?: K8sClients;
  uid?: number;
  cpus?: number;
  /** Memory limit of the pod, MiB (default limits.memoryMb). */
  sandboxMemoryMb?: number;
  workspaceMb?: number;
  tmpSizeMb?: number;
  maxFileMb?: number;
  maxOutputBytes?: number;
  maxSandboxes?: number;
  /** How long a pod may take to run (image pull included), ms (default 120 s). */
  startTimeoutMs?: number;
  /** Node folders every pod sees read-only (hostPath volumes; see K8sPodSpec.readOnlyMounts). */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

/** Every value the provider needs, defaults applied. */
interface K8sContext {
  clients: K8sClients;
  clock: Clock;
  limits: SandboxLimits;
  namespace: string;
  maxFileMb: number;
  maxOutputBytes: number;
}

const POLL_MS = 250;
const FATAL_WAITING = /ErrImagePull|ImagePullBackOff|InvalidImageName|CreateContainerConfigError|CreateContainerError/;

/** One program's pod. */
class K8sSandbox implements Sandbox {
  readonly hostWorkspace: string;
  private destroyed = false;
  private destroying: Promise<void> | undefined;
  private execSeq = 0;
  private readonly sockets = new Set<{ close(): void }>();
  private counters = { oomKills: 0, pidsRefused: 0 };

  constructor(
    readonly programId: string,
    readonly podName: string,
    private readonly ctx: K8sContext,
    private readonly onGone: (s: K8sSandbox) => void,
  ) {
    this.hostWorkspace = `k8s://${ctx.namespace}/${podName}${SANDBOX_WORKSPACE}`;
  }

  /** Run `command` in the pod; resolves when the API reports its status (or the socket is closed). */
  private run(command: string[], stdin: string | Uint8Array | undefined, wallMs: number, onTimeout?: () => void) {
    const out = new CappedOutput(this.ctx.maxOutputBytes);
    const err = new CappedOutput(this.ctx.maxOutputBytes);
    let socket: { close(): void } | undefined;
    let timedOut = false;
    const done = new Promise<V1Status | undefined>((resolve, reject) => {
      let grace: Timer | undefined;
      const timer = this.ctx.clock.setTimer(wallMs, () => {
        timedOut = true;
        onTimeout?.();
        // The command ends after the grace period even if a process the kill missed holds the socket open.
        grace = this.ctx.clock.setTimer(EXEC_KILL_GRACE_MS, () => {
          socket?.close();
          finish(undefined);
        });
      });
      let finished = false;
      const finish = (s: V1Status | undefined): void => {
        if (finished) return;
        finished = true;
        timer.cancel();
        grace?.cancel();
        if (socket) this.sockets.delete(socket);
        resolve(s);
      };
      this.ctx.clients.exec
        .exec(this.ctx.namespace, this.podName, SANDBOX_CONTAINER, command, outputSink(out), outputSink(err), Readable.from([stdin ?? ""]), false, finish)
        .then((ws) => {
          if (finished) return;
          socket = ws;
          this.sockets.add(ws);
          // A socket closed without a status (pod deleted, API gone) ends the command too.
          const s = ws as unknown as { on?: (ev: string, fn: () => void) => void };
          s.on?.("close", () => finish(undefined));
        })
        .catch((e: unknown) => {
          timer.cancel();
          reject(e);
        });
    });
    return { done, out, err, timedOut: () => timedOut };
  }

  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    if (argv.length === 0) throw new ArborError(`sandbox ${this.programId}: exec: argv must not be empty`, "sandbox");
    const tooBig = execSizeProblem(argv, opts.env);
    if (tooBig !== undefined) return argumentsLimitResult(tooBig);
    const id = ++this.execSeq;
    const cwd = opts.cwd === undefined ? SANDBOX_WORKSPACE : posix.resolve(SANDBOX_WORKSPACE, opts.cwd);
    const start = this.ctx.clock.now();
    const cmd = execCommand(id, argv, { cwd, env: opts.env, cpuSeconds: this.ctx.limits.cpuSeconds, maxFileMb: this.ctx.maxFileMb });
    const r = this.run(cmd, opts.stdin, opts.wallMs ?? this.ctx.limits.wallMs, () => void this.helper(killCommand(id)));
    const status = await r.done.catch((e: unknown) => {
      throw new ArborError(`sandbox ${this.programId}: exec failed: ${(e as Error).message}`, "sandbox");
    });
    const decoded = this.destroyed || !status ? { exitCode: null, signal: "SIGKILL" } : decodeStatus(exitCodeOf(status), null);
    const res: ExecResult = {
      ...decoded,
      stdout: r.out.text(),
      stderr: r.err.text(),
      timedOut: r.timedOut(),
      durationMs: this.ctx.clock.now() - start,
    };
    const grown = res.exitCode !== 0 && !this.destroyed ? await this.counterGrowth() : { oomKills: 0, pidsRefused: 0 };
    const limit = classifyLimit({ ...res, ...grown, diskFull: false });
    return limit ? { ...res, limit } : res;
  }

  async writeFile(relPath: string, data: string | Uint8Array): Promise<void> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    const target = posix.resolve(SANDBOX_WORKSPACE, relPath);
    if (relPath === "" || !target.startsWith(`${SANDBOX_WORKSPACE}/`)) {
      throw new ArborError(`sandbox ${this.programId}: writeFile path '${relPath}' must stay inside the workspace`, "sandbox");
    }
    // Written by the sandbox's own user inside the pod: a planted symlink reaches nothing it could not.
    const r = this.run(writeCommand(target), data, this.ctx.limits.wallMs);
    const status = await r.done;
    if (exitCodeOf(status) !== 0) {
      throw new ArborError(`sandbox ${this.programId}: cannot write '${relPath}': ${r.err.text().trim() || "write failed"}`, "sandbox");
    }
  }

  destroy(): Promise<void> {
    this.destroying ??= this.teardown();
    return this.destroying;
  }

  private async teardown(): Promise<void> {
    this.destroyed = true;
    for (const s of this.sockets) s.close();
    this.sockets.clear();
    const notFound = (e: { code?: number; statusCode?: number }): void => {
      if ((e.code ?? e.statusCode) !== 404) throw e;
    };
    try {
      await this.ctx.clients.core.deleteNamespacedPod({ name: this.podName, namespace: this.ctx.namespace, gracePeriodSeconds: 0 }).catch(notFound);
      await this.ctx.clients.networking.deleteNamespacedNetworkPolicy({ name: this.podName, namespace: this.ctx.namespace }).catch(notFound);
    } finally {
      this.onGone(this);
    }
  }

  private async helper(command: string[]): Promise<string> {
    if (this.destroyed) return "";
    const r = this.run(command, undefined, this.ctx.limits.wallMs);
    await r.done.catch(() => undefined);
    return r.out.text();
  }

  private async counterGrowth(): Promise<{ oomKills: number; pidsRefused: number }> {
    const now = parseCounters(await this.helper(countersSpec().Cmd as string[]).catch(() => ""));
    const grown = counterGrowth(this.counters, now);
    this.counters = now;
    return grown;
  }
}

/** Where a kubeconfig would come from here, or undefined when there is none (nor in-cluster config). */
function kubeconfigSource(): string | undefined {
  if (process.env.KUBECONFIG) return `KUBECONFIG=${process.env.KUBECONFIG}`;
  if (process.env.KUBERNETES_SERVICE_HOST) return "in-cluster service account";
  const home = join(homedir(), ".kube", "config");
  return existsSync(home) ? home : undefined;
}

/** Build the real clients from the default kubeconfig. */
export async function defaultK8sClients(): Promise<K8sClients> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  return {
    core: kc.makeApiClient(k8s.CoreV1Api),
    networking: kc.makeApiClient(k8s.NetworkingV1Api),
    exec: new k8s.Exec(kc) as unknown as K8sExecLike,
  };
}

/** Whether a cluster is reachable: a kubeconfig (or in-cluster config), then one cheap API call. */
export async function k8sAvailable(namespace = "default", timeoutMs = 3000, clock: Clock = realClock): Promise<{ ok: boolean; message: string }> {
  const source = kubeconfigSource();
  if (!source) return { ok: false, message: "no Kubernetes cluster: no KUBECONFIG, no ~/.kube/config, not running in a cluster" };
  try {
    await withinMs(clock, timeoutMs, async () => {
      const k8s = await import("@kubernetes/client-node");
      const kc = new k8s.KubeConfig();
      kc.loadFromDefault();
      return kc.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace, limit: 1 });
    });
    return { ok: true, message: `Kubernetes API answers (${source})` };
  } catch (e) {
    return { ok: false, message: `Kubernetes cluster from ${source} does not answer: ${(e as Error).message}` };
  }
}

/** The Kubernetes implementation of {@link SandboxProvider}. */
export class K8sProvider implements SandboxProvider {
  readonly name = "k8s";
  private readonly live: LiveSandboxes<K8sSandbox>;
  private ctx: K8sContext | undefined;
  private seq = 0;
  private readonly o: {
    image: string;
    uid: number;
    cpus: number;
    sandboxMemoryMb: number;
    workspaceMb: number;
    tmpSizeMb: number;
    maxSandboxes: number;
    startTimeoutMs: number;
  };
  private readonly readOnlyMounts: ReadOnlyMount[];

  constructor(private readonly opts: K8sProviderOptions) {
    const l = opts.limits;
    checkLimits(l);
    this.o = {
      image: opts.image ?? "debian:bookworm-slim",
      uid: opts.uid ?? 65534,
      cpus: opts.cpus ?? 1,
      sandboxMemoryMb: opts.sandboxMemoryMb ?? l.memoryMb,
      workspaceMb: opts.workspaceMb ?? 256,
      tmpSizeMb: opts.tmpSizeMb ?? 64,
      maxSandboxes: opts.maxSandboxes ?? 1024,
      startTimeoutMs: opts.startTimeoutMs ?? 120_000,
    };
    for (const [k, v] of Object.entries(this.o)) if (typeof v === "number") positive(k, v);
    // The folders are on the nodes, not here: only their paths can be checked.
    this.readOnlyMounts = checkReadOnlyMounts(opts.readOnlyMounts ?? [], { onThisHost: false });
    this.live = new LiveSandboxes("k8s sandbox provider", this.o.maxSandboxes, "pod(s)");
  }

  private async context(): Promise<K8sContext> {
    this.ctx ??= {
      clients: this.opts.clients ?? (await defaultK8sClients()),
      clock: this.opts.clock ?? realClock,
      limits: { ...this.opts.limits },
      namespace: this.opts.namespace ?? "default",
      maxFileMb: this.opts.maxFileMb ?? 512,
      maxOutputBytes: this.opts.maxOutputBytes ?? 1024 * 1024,
    };
    return this.ctx;
  }

  async create(programId: string): Promise<Sandbox> {
    this.live.checkRoom();
    const ctx = await this.context();
    const safe = programId.toLowerCase().replace(/[^a-z0-9-]/g, "-").slice(0, 30).replace(/^-+|-+$/g, "") || "program";
    const name = `arbor-${safe}-${process.pid.toString(36)}-${(++this.seq).toString(36)}`;
    const ns = ctx.namespace;
    const sb = new K8sSandbox(programId, name, ctx, (s) => this.live.delete(s));
    this.live.add(sb);
    try {
      await ctx.clients.networking.createNamespacedNetworkPolicy({ namespace: ns, body: networkPolicySpec(name) });
      await ctx.clients.core.createNamespacedPod({
        namespace: ns,
        body: podSpec({ name, programId, image: this.o.image, uid: this.o.uid, cpus: this.o.cpus, memoryMb: this.o.sandboxMemoryMb, workspaceMb: this.o.workspaceMb, tmpSizeMb: this.o.tmpSizeMb, readOnlyMounts: this.readOnlyMounts }),
      });
      await this.waitRunning(ctx, name);
    } catch (e) {
      await sb.destroy().catch(() => undefined);
      throw new ArborError(`sandbox ${programId}: pod ${ns}/${name} did not start: ${(e as Error).message}`, "sandbox");
    }
    return sb;
  }

  private async waitRunning(ctx: K8sContext, name: string): Promise<void> {
    const start = ctx.clock.now();
    for (;;) {
      const pod = await ctx.clients.core.readNamespacedPod({ name, namespace: ctx.namespace });
      const phase = pod.status?.phase;
      if (phase === "Running" && pod.status?.containerStatuses?.every((c) => c.ready)) return;
      const waiting = pod.status?.containerStatuses?.find((c) => c.state?.waiting)?.state?.waiting;
      if (phase === "Failed" || phase === "Succeeded" || (waiting?.reason && FATAL_WAITING.test(waiting.reason))) {
        throw new Error(`phase ${phase}${waiting ? `, ${waiting.reason}: ${waiting.message ?? ""}` : ""}`);
      }
      if (ctx.clock.now() - start > this.o.startTimeoutMs) throw new Error(`not running after ${this.o.startTimeoutMs} ms (phase ${phase})`);
      await ctx.clock.sleep(POLL_MS);
    }
  }

  /** Number of pods created and not yet deleted. */
  get liveCount(): number {
    return this.live.size;
  }

  destroyAll(): Promise<void> {
    return this.live.destroyAll();
  }
}

/** Create a k8s provider (the cluster is contacted on the first create). */
export function createK8sProvider(opts: K8sProviderOptions): K8sProvider {
  return new K8sProvider(opts);
}
