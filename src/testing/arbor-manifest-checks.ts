// Checks of a rendered Kubernetes deployment of Arbor (deploy/k8s) that the API schemas cannot make: that
// each Arbor container runs an `arbor` command that exists, with the cluster file (and run config) it
// mounts valid; that its probes and ports are the ones that file makes it listen on and its grace period
// outlasts its drain; that every Service selects pods and reaches a port they have; that the cluster file's
// URLs name Services and their ports; that Secrets and ConfigMaps referenced exist; that vLLM/SGLang engines
// listen where their Service sends traffic and are probed on /health; and that the workers' service account
// may make every Kubernetes API call of the k8s sandbox provider, in the namespace run.yaml puts sandboxes in.
import type { IContainer } from "kubernetes-models/v1/Container";
import type { IPodSpec } from "kubernetes-models/v1/PodSpec";
import type { IProbe } from "kubernetes-models/v1/Probe";
import { parse as parseYaml } from "yaml";
import { clusterRunConfig, parseClusterConfig, type ClusterConfig } from "../core/cluster-config.js";
import { parseRunConfig, type RunConfig } from "../core/config.js";
import { ABORTED_END_MS } from "../rollout/remote/program-worker.js";
import type { K8sObject } from "./kustomize-build.js";

/** One `arbor serve` subcommand (or `arbor run`) as the CLI defines it. */
export interface ServeCommandSpec {
  /** Long options (`--cluster`) and whether each takes a value. */
  options: Map<string, { takesValue: boolean; mandatory: boolean }>;
}

export interface ManifestCheckOptions {
  /** The `arbor serve` subcommands, by name. */
  serveCommands: Map<string, ServeCommandSpec>;
  /** `arbor run`. */
  runCommand: ServeCommandSpec;
  /** Source text of src/sandbox/k8s.ts: the API calls the workers' Role must allow are read from it. */
  sandboxProviderSource: string;
}

/** Default `--drain-ms` of every `arbor serve` command (src/cli/serve.ts DEFAULT_DRAIN_MS). */
const DEFAULT_DRAIN_MS = 30_000;
/** Kubernetes' default terminationGracePeriodSeconds. */
const DEFAULT_GRACE_S = 30;
const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job"]);
const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"]);

/** Kubernetes API calls of the k8s sandbox provider → the RBAC rule each needs (group, resource, verb). */
const PROVIDER_CALLS: Record<string, { group: string; resource: string; verbs: string[] }> = {
  createNamespacedPod: { group: "", resource: "pods", verbs: ["create"] },
  readNamespacedPod: { group: "", resource: "pods", verbs: ["get"] },
  deleteNamespacedPod: { group: "", resource: "pods", verbs: ["delete"] },
  listNamespacedPod: { group: "", resource: "pods", verbs: ["list"] },
  createNamespacedNetworkPolicy: { group: "networking.k8s.io", resource: "networkpolicies", verbs: ["create"] },
  deleteNamespacedNetworkPolicy: { group: "networking.k8s.io", resource: "networkpolicies", verbs: ["delete"] },
};
/** An exec is a websocket: GET upgraded, authorized as `create` by newer API servers and `get` by older ones. */
const EXEC_RULE = { group: "", resource: "pods/exec", verbs: ["create", "get"] };

interface Workload {
  obj: K8sObject;
  ns: string;
  labels: Record<string, string>;
  pod: IPodSpec;
}

interface RuleLike {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
}

const describe = (o: K8sObject): string => `${o.kind} ${o.metadata.name}`;

function workloadsOf(objects: K8sObject[]): Workload[] {
  return objects
    .filter((o) => WORKLOAD_KINDS.has(o.kind))
    .map((o) => {
      const tpl = (o.spec as { template?: { metadata?: { labels?: Record<string, string> }; spec?: IPodSpec } } | undefined)?.template;
      return { obj: o, ns: o.metadata.namespace ?? "", labels: tpl?.metadata?.labels ?? {}, pod: tpl?.spec ?? { containers: [] } };
    });
}

/** `image` is Arbor's own (repository name `arbor`, any registry and tag). */
export function isArborImage(image: string | undefined): boolean {
  if (image === undefined) return false;
  const repo = image.replace(/@.*$/, "").replace(/:[^/:]*$/, "");
  return repo.split("/").pop() === "arbor";
}

/** A container port given by name or number, as its number. */
function portNumber(c: IContainer, port: string | number | undefined): number | undefined {
  if (typeof port === "number") return port;
  if (port === undefined) return undefined;
  if (/^\d+$/.test(port)) return Number(port);
  return c.ports?.find((p) => p.name === port)?.containerPort;
}

/** `args` with each `$(VAR)` replaced by the container's env value (a field reference as `<fieldPath>`). */
function expandArgs(c: IContainer, problems: string[], where: string): string[] {
  return (c.args ?? []).map((a) =>
    a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (_, name: string) => {
      const env = c.env?.find((e) => e.name === name);
      if (!env) {
        problems.push(`${where}: args use $(${name}), which the container's env does not define`);
        return `$(${name})`;
      }
      return env.value ?? (env.valueFrom?.fieldRef ? `<${env.valueFrom.fieldRef.fieldPath}>` : `<${name}>`);
    }),
  );
}

/** Options and positionals of argv after the subcommand; unknown options and missing values are problems. */
function parseArgv(argv: string[], spec: ServeCommandSpec, problems: string[], where: string): { opts: Map<string, string>; positionals: string[] } {
  const opts = new Map<string, string>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (!a.startsWith("--")) {
      positionals.push(a);
      continue;
    }
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const o = spec.options.get(flag);
    if (!o) {
      problems.push(`${where}: option ${flag} is not an option of this command (it has ${[...spec.options.keys()].join(", ")})`);
      continue;
    }
    if (!o.takesValue) opts.set(flag, "true");
    else if (inline !== undefined) opts.set(flag, inline);
    else if (i + 1 < argv.length) opts.set(flag, argv[++i] as string);
    else problems.push(`${where}: option ${flag} needs a value`);
  }
  for (const [flag, o] of spec.options) if (o.mandatory && !opts.has(flag)) problems.push(`${where}: missing ${flag}`);
  return { opts, positionals };
}

/** The text of the ConfigMap key mounted at `path` in container `c` of `w`, or a problem. */
function mountedFile(objects: K8sObject[], w: Workload, c: IContainer, path: string): { text: string } | { problem: string } {
  const mount = (c.volumeMounts ?? []).filter((m) => path.startsWith(`${m.mountPath.replace(/\/+$/, "")}/`)).sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return { problem: `${path} is not on any volume the container mounts` };
  const vol = w.pod.volumes?.find((v) => v.name === mount.name);
  const cmName = vol?.configMap?.name;
  if (!cmName) return { problem: `${path} is on volume '${mount.name}', which is not a ConfigMap` };
  const key = path.slice(mount.mountPath.replace(/\/+$/, "").length + 1);
  const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === cmName && (o.metadata.namespace ?? "") === w.ns);
  if (!cm) return { problem: `${path}: ConfigMap ${cmName} is not in the manifests` };
  const text = (cm.data as Record<string, string> | undefined)?.[key];
  return text === undefined ? { problem: `${path}: ConfigMap ${cmName} has no key ${key}` } : { text };
}

function probeProblems(c: IContainer, probe: IProbe | undefined, kind: string, path: string, port: number, where: string): string[] {
  if (!probe) return [`${where}: no ${kind} probe (${path} on port ${port})`];
  const get = probe.httpGet;
  if (!get) return [`${where}: the ${kind} probe is not an HTTP GET of ${path}`];
  const out: string[] = [];
  if (get.path !== path) out.push(`${where}: the ${kind} probe asks ${get.path ?? "/"}, not ${path}`);
  const n = portNumber(c, get.port);
  if (n !== port) out.push(`${where}: the ${kind} probe's port is ${String(get.port)} (${n ?? "no such container port"}), but the service listens on ${port}`);
  return out;
}

/** Host and port of a URL (default port by scheme), or undefined when it does not parse. */
function hostPort(url: string): { host: string; port: number } | undefined {
  try {
    const u = new URL(url);
    const defaults: Record<string, number> = { "http:": 80, "https:": 443, "postgres:": 5432, "postgresql:": 5432, "nats:": 4222 };
    const port = u.port === "" ? defaults[u.protocol] : Number(u.port);
    return port === undefined ? undefined : { host: u.hostname, port };
  } catch {
    return undefined;
  }
}

/** The Service a URL host names (`svc`, `svc.ns`, `svc.ns.svc…`) in namespace `ns`, and the workloads behind it. */
function serviceAt(objects: K8sObject[], workloads: Workload[], url: string, ns: string): { problem?: string; external?: boolean; pods: { w: Workload; c: IContainer; targetPort: number }[] } {
  const hp = hostPort(url);
  if (!hp) return { problem: `'${url}' is not a URL with a port`, pods: [] };
  const [svcName, svcNs = ns] = hp.host.split(".");
  // An address outside the manifests (another namespace, an IP, an external host) cannot be checked here.
  if (svcNs !== ns || /^[\d.]+$|^\[/.test(hp.host)) return { external: true, pods: [] };
  const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === svcName && (o.metadata.namespace ?? "") === svcNs);
  if (!svc) return { problem: `'${url}': no Service '${svcName}' in namespace '${svcNs}'`, pods: [] };
  const spec = svc.spec as { selector?: Record<string, string>; ports?: { port: number; targetPort?: string | number }[] };
  const sp = spec.ports?.find((p) => p.port === hp.port);
  if (!sp) return { problem: `'${url}': Service ${svcName} has no port ${hp.port} (it has ${(spec.ports ?? []).map((p) => p.port).join(", ")})`, pods: [] };
  const pods: { w: Workload; c: IContainer; targetPort: number }[] = [];
  for (const w of workloads.filter((x) => x.ns === svcNs && selects(spec.selector, x.labels))) {
    for (const c of w.pod.containers) {
      const n = portNumber(c, sp.targetPort ?? sp.port);
      if (n !== undefined && c.ports?.some((p) => p.containerPort === n)) pods.push({ w, c, targetPort: n });
    }
  }
  return { pods };
}

const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The value of `--flag value` or `--flag=value` in a non-Arbor container's argv. */
function flagValue(argv: string[], flag: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === flag) return argv[i + 1];
    if (argv[i]?.startsWith(`${flag}=`)) return (argv[i] as string).slice(flag.length + 1);
  }
  return undefined;
}

/** Every problem of the rendered `objects`; empty when the deployment is consistent. */
export function arborManifestProblems(objects: K8sObject[], o: ManifestCheckOptions): string[] {
  const problems: string[] = [];
  const workloads = workloadsOf(objects);

  // One namespace for everything namespaced, named explicitly (nothing lands in kubectl's current one).
  const namespaces = new Set(objects.filter((x) => !CLUSTER_SCOPED.has(x.kind)).map((x) => x.metadata.namespace ?? ""));
  if (namespaces.has("")) problems.push(`objects without a namespace: ${objects.filter((x) => !CLUSTER_SCOPED.has(x.kind) && !x.metadata.namespace).map(describe).join(", ")}`);
  if (namespaces.size > 1) problems.push(`objects in several namespaces: ${[...namespaces].join(", ")}`);

  // Services select pods and reach a port they expose.
  for (const svc of objects.filter((x) => x.kind === "Service")) {
    const spec = svc.spec as { selector?: Record<string, string>; ports?: { name?: string; port: number; targetPort?: string | number }[] };
    const behind = workloads.filter((w) => w.ns === (svc.metadata.namespace ?? "") && selects(spec.selector, w.labels));
    if (behind.length === 0) {
      problems.push(`${describe(svc)}: selector ${JSON.stringify(spec.selector ?? {})} matches no workload's pod labels`);
      continue;
    }
    for (const p of spec.ports ?? []) {
      const reached = behind.some((w) => w.pod.containers.some((c) => {
        const n = portNumber(c, p.targetPort ?? p.port);
        return n !== undefined && (c.ports ?? []).some((cp) => cp.containerPort === n);
      }));
      if (!reached) problems.push(`${describe(svc)}: port ${p.port} targets ${String(p.targetPort ?? p.port)}, which no selected pod's container exposes`);
    }
  }
  for (const ss of objects.filter((x) => x.kind === "StatefulSet")) {
    const name = (ss.spec as { serviceName?: string }).serviceName;
    if (name !== undefined && !objects.some((x) => x.kind === "Service" && x.metadata.name === name)) problems.push(`${describe(ss)}: serviceName ${name} is not a Service of the manifests`);
  }

  // Secrets and ConfigMaps that pods read exist, with the keys read.
  for (const w of workloads) {
    for (const c of [...w.pod.containers, ...(w.pod.initContainers ?? [])]) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (!ref || ref.optional) continue;
        const s = objects.find((x) => x.kind === "Secret" && x.metadata.name === ref.name && (x.metadata.namespace ?? "") === w.ns);
        const keys = { ...(s?.data as object | undefined), ...(s?.stringData as object | undefined) };
        if (!s) problems.push(`${describe(w.obj)} ${c.name}: env ${e.name} reads Secret ${ref.name}, which is not in the manifests`);
        else if (!(ref.key in keys)) problems.push(`${describe(w.obj)} ${c.name}: env ${e.name} reads key ${ref.key} of Secret ${ref.name}, which has ${Object.keys(keys).join(", ")}`);
      }
    }
    for (const v of w.pod.volumes ?? []) {
      const cm = v.configMap;
      if (cm?.name && !cm.optional && !objects.some((x) => x.kind === "ConfigMap" && x.metadata.name === cm.name && (x.metadata.namespace ?? "") === w.ns)) {
        problems.push(`${describe(w.obj)}: volume ${v.name} is ConfigMap ${cm.name}, which is not in the manifests`);
      }
    }
  }

  // Arbor's containers: the command, its files, ports, probes and drain.
  const clusterFiles = new Map<string, { cfg: ClusterConfig; ns: string }>();
  const runs: { cfg: RunConfig; cluster: ClusterConfig | undefined; where: string }[] = [];
  const workerAccounts: { sa: string; ns: string; where: string }[] = [];
  for (const w of workloads) {
    for (const c of w.pod.containers) {
      if (!isArborImage(c.image)) continue;
      const where = `${describe(w.obj)} container ${c.name}`;
      if (c.command !== undefined) problems.push(`${where}: sets command; Arbor's containers run the image's entrypoint (node bin/arbor.mjs) with args`);
      const argv = expandArgs(c, problems, where);
      const [first, sub] = argv;
      const isServe = first === "serve";
      if (!(isServe || first === "run")) {
        problems.push(`${where}: args ${JSON.stringify(argv)} are neither \`serve <role>\` nor \`run <config>\``);
        continue;
      }
      const spec: ServeCommandSpec | undefined = isServe
        ? o.serveCommands.get(sub ?? "")
        : o.runCommand;
      if (!spec) {
        problems.push(`${where}: \`arbor serve ${sub ?? ""}\` is not a command (arbor serve has ${[...o.serveCommands.keys()].join(", ")})`);
        continue;
      }
      const { opts, positionals } = parseArgv(argv.slice(isServe ? 2 : 1), spec, problems, where);
      const clusterPath = opts.get("--cluster");
      let cluster: ClusterConfig | undefined;
      if (clusterPath !== undefined) {
        const f = mountedFile(objects, w, c, clusterPath);
        if ("problem" in f) problems.push(`${where}: --cluster ${f.problem}`);
        else {
          try {
            cluster = parseClusterConfig(parseYaml(f.text), `cluster file ${clusterPath} of ${where}`);
            clusterFiles.set(f.text, { cfg: cluster, ns: w.ns });
          } catch (e) {
            problems.push((e as Error).message);
          }
        }
      }
      if (!isServe) {
        const runPath = positionals[0];
        if (runPath === undefined || positionals.length !== 1) {
          problems.push(`${where}: \`arbor run\` takes one run config, got ${JSON.stringify(positionals)}`);
          continue;
        }
        const f = mountedFile(objects, w, c, runPath);
        if ("problem" in f) problems.push(`${where}: run config ${f.problem}`);
        else {
          try {
            const source = `run config ${runPath} of ${where}`;
            // With --cluster, the deployment's store, backends and engines are merged in (and may not be repeated).
            runs.push({ cfg: cluster ? clusterRunConfig(parseYaml(f.text), cluster, source) : parseRunConfig(parseYaml(f.text), source), cluster, where });
          } catch (e) {
            problems.push((e as Error).message);
          }
        }
        continue;
      }
      if (positionals.length > 0) problems.push(`${where}: unexpected arguments ${JSON.stringify(positionals)}`);
      if (!cluster) continue;
      const role = sub as string;
      if (role === "worker") workerAccounts.push({ sa: w.pod.serviceAccountName ?? "default", ns: w.ns, where });
      let listen: { host: string; port: number } | undefined;
      if (role === "gateway") listen = cluster.gateway;
      else if (role === "worker") listen = cluster.worker;
      else if (role === "trainer-api") listen = cluster.trainerApi;
      else if (role === "engine") {
        const name = opts.get("--name");
        const e = cluster.engines.find((x) => x.name === name);
        if (!e) problems.push(`${where}: --name ${name ?? "(none)"} is not an engine of the cluster file (${cluster.engines.map((x) => x.name).join(", ") || "none"})`);
        else listen = e;
      }
      if (!listen) continue;
      if (listen.host !== "0.0.0.0" && listen.host !== "::") problems.push(`${where}: the cluster file has it listen on ${listen.host}, which other pods and the kubelet's probes cannot reach (use 0.0.0.0)`);
      if (listen.port === 0) problems.push(`${where}: the cluster file gives port 0 (any free port), which no probe or Service can name`);
      if (!(c.ports ?? []).some((p) => p.containerPort === listen.port)) problems.push(`${where}: no containerPort ${listen.port} (the port the cluster file has it listen on)`);
      problems.push(...probeProblems(c, c.readinessProbe, "readiness", "/readyz", listen.port, where));
      problems.push(...probeProblems(c, c.livenessProbe, "liveness", "/healthz", listen.port, where));
      const drainMs = opts.has("--drain-ms") ? Number(opts.get("--drain-ms")) : DEFAULT_DRAIN_MS;
      const graceS = w.pod.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S;
      // A worker then aborts the programs left and waits for them to record their end (up to ABORTED_END_MS).
      const stopMs = drainMs + (role === "worker" ? ABORTED_END_MS : 0);
      if (!(graceS * 1000 > stopMs)) {
        const what = role === "worker" ? `its drain (--drain-ms ${drainMs}) and the ${ABORTED_END_MS} ms its aborted programs get to record their end` : `its drain (--drain-ms ${drainMs})`;
        problems.push(`${where}: terminationGracePeriodSeconds ${graceS} is not longer than ${what}; the kubelet would kill it mid-drain`);
      }
    }
  }

  // The cluster file's addresses are Services of the manifests, at their ports.
  for (const { cfg, ns } of clusterFiles.values()) {
    const urls: [string, string][] = [
      ["store.url", cfg.store.url ?? ""],
      ...(cfg.broker ? ([["broker.url", cfg.broker.url]] as [string, string][]) : []),
      ...(cfg.gatewayUrl !== undefined ? ([["gatewayUrl", cfg.gatewayUrl]] as [string, string][]) : []),
      ...cfg.backends.map((b, i): [string, string] => [`backends[${i}] (${b.name}).url`, b.url ?? ""]),
    ];
    for (const [field, url] of urls) {
      const at = serviceAt(objects, workloads, url, ns);
      if (at.problem) problems.push(`cluster file ${field}: ${at.problem}`);
      else if (!at.external && at.pods.length === 0) problems.push(`cluster file ${field}: '${url}' reaches no container port of a selected pod`);
    }
    if (cfg.gatewayUrl !== undefined) {
      const at = serviceAt(objects, workloads, cfg.gatewayUrl, ns);
      if (at.pods.length > 0 && !at.pods.some((p) => p.targetPort === cfg.gateway.port)) problems.push(`cluster file gatewayUrl: '${cfg.gatewayUrl}' reaches port ${at.pods.map((p) => p.targetPort).join(", ")}, not gateway.port ${cfg.gateway.port}`);
    }
    // External engines run by these manifests listen where their Service sends traffic and are probed on /health.
    for (const b of cfg.backends.filter((x) => x.type === "vllm" || x.type === "sglang")) {
      for (const { w, c, targetPort } of serviceAt(objects, workloads, b.url ?? "", ns).pods) {
        const where = `${describe(w.obj)} container ${c.name} (backend ${b.name})`;
        const argv = [...(c.command ?? []), ...(c.args ?? [])];
        const model = b.type === "vllm" ? flagValue(argv, "--model") : flagValue(argv, "--model-path");
        if (model === undefined) problems.push(`${where}: no ${b.type === "vllm" ? "--model" : "--model-path"} in its command line`);
        if (b.type === "sglang" && !argv.includes("sglang.launch_server")) problems.push(`${where}: does not run sglang.launch_server`);
        if (flagValue(argv, "--port") !== String(targetPort)) problems.push(`${where}: --port ${flagValue(argv, "--port") ?? "(default)"}, but its Service targets ${targetPort}`);
        if (flagValue(argv, "--host") !== "0.0.0.0") problems.push(`${where}: --host ${flagValue(argv, "--host") ?? "(default)"}; it must listen on 0.0.0.0 to be reached`);
        if (b.model !== undefined && flagValue(argv, "--served-model-name") !== b.model) problems.push(`${where}: serves '${flagValue(argv, "--served-model-name") ?? model ?? "?"}', but the backend sends model '${b.model}'`);
        problems.push(...probeProblems(c, c.readinessProbe, "readiness", "/health", targetPort, where));
      }
    }
  }

  // The orchestrator's run config agrees with the deployment it runs on.
  for (const { cfg, cluster, where } of runs) {
    if (!cluster) {
      problems.push(`${where}: \`arbor run\` without --cluster runs everything in its own pod`);
      continue;
    }
    if (cfg.sandbox.provider !== "k8s") problems.push(`${where}: run config sandbox.provider is ${cfg.sandbox.provider}; in Kubernetes sandboxes are pods (provider k8s)`);
    else {
      const ns = cfg.sandbox.k8s.namespace;
      if (workerAccounts.length === 0) problems.push(`${where}: no \`arbor serve worker\` runs the programs`);
      for (const wa of workerAccounts) {
        if (wa.ns !== ns) problems.push(`${wa.where}: runs in namespace ${wa.ns}, but run.yaml puts sandboxes in ${ns} (sandbox.k8s.namespace)`);
        problems.push(...rbacProblems(objects, wa, ns, o.sandboxProviderSource));
      }
    }
  }
  return problems;
}

/** What the k8s provider's source calls that `sa` may not do in namespace `ns`. */
function rbacProblems(objects: K8sObject[], wa: { sa: string; ns: string; where: string }, ns: string, source: string): string[] {
  const problems: string[] = [];
  const needed: { group: string; resource: string; verbs: string[]; why: string }[] = [];
  for (const m of new Set([...source.matchAll(/\b([a-z]+Namespaced[A-Za-z]+)\b/g)].map((x) => x[1] as string))) {
    const rule = PROVIDER_CALLS[m];
    if (!rule) problems.push(`src/sandbox/k8s.ts calls ${m}, which the manifest test does not know the RBAC of: add it to PROVIDER_CALLS`);
    else needed.push({ ...rule, why: m });
  }
  if (/\.exec\(|new k8s\.Exec\(/.test(source)) needed.push({ ...EXEC_RULE, why: "exec" });
  const rules: RuleLike[] = [];
  for (const rb of objects.filter((x) => (x.kind === "RoleBinding" && x.metadata.namespace === ns) || x.kind === "ClusterRoleBinding")) {
    const subjects = (rb.subjects as { kind: string; name: string; namespace?: string }[] | undefined) ?? [];
    if (!subjects.some((s) => s.kind === "ServiceAccount" && s.name === wa.sa && (s.namespace ?? rb.metadata.namespace) === wa.ns)) continue;
    const ref = rb.roleRef as { kind: string; name: string };
    const role = objects.find((x) => x.kind === ref.kind && x.metadata.name === ref.name && (ref.kind === "ClusterRole" || x.metadata.namespace === ns));
    if (!role) problems.push(`${describe(rb)}: roleRef ${ref.kind} ${ref.name} is not in the manifests`);
    else rules.push(...((role.rules as RuleLike[] | undefined) ?? []));
  }
  const allows = (group: string, resource: string, verb: string): boolean =>
    rules.some((r) => (r.apiGroups ?? []).some((g) => g === group || g === "*") && (r.resources ?? []).some((x) => x === resource || x === "*") && r.verbs.some((v) => v === verb || v === "*"));
  for (const n of needed) {
    for (const verb of n.verbs) {
      if (!allows(n.group, n.resource, verb)) problems.push(`${wa.where}: service account ${wa.sa} may not ${verb} ${n.resource}${n.group ? `.${n.group}` : ""} in namespace ${ns} (the k8s sandbox provider's ${n.why})`);
    }
  }
  return problems;
}
