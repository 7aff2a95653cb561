// The Kubernetes manifests of deploy/k8s: every kustomization builds from files that exist and every YAML
// file there is used by one; every object is valid against the Kubernetes API schemas (no unknown field);
// the ConfigMap's cluster.yaml and run.yaml pass Arbor's own parsers; Arbor's containers run commands the
// CLI has, probed on the ports cluster.yaml gives them, with a grace period longer than their drain; every
// Service selects pods; the workers may do what the k8s sandbox provider does. Each check is also shown to
// fail on a broken copy of the manifests. Where kubectl is installed, `kubectl kustomize` renders the same
// objects as the test's own build. deploy/Dockerfile copies files that exist, runs the CLI and holds the
// models the cluster files serve.
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { registerServeCommands } from "../cli/serve.js";
import { registerRunCommand } from "../cli/register-run.js";
import { arborManifestProblems, type ManifestCheckOptions, type ServeCommandSpec } from "./arbor-manifest-checks.js";
import { k8sSchemaProblems } from "./k8s-schema.js";
import { buildKustomization, type K8sObject, type KustomizeBuild } from "./kustomize-build.js";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const K8S_DIR = join(REPO, "deploy/k8s");
const BASE = join(K8S_DIR, "base");

/**
 * `arbor serve` subcommands the lead is adding (worker, trainer-api), with the options their briefs give:
 * used only while src/cli/serve.ts does not register them, after which the CLI's own definition is checked.
 */
const AWAITED_SERVE_COMMANDS: Record<string, ServeCommandSpec> = {
  worker: {
    options: new Map([
      ["--cluster", { takesValue: true, mandatory: true }],
      ["--name", { takesValue: true, mandatory: true }],
      ["--drain-ms", { takesValue: true, mandatory: false }],
    ]),
  },
  "trainer-api": {
    options: new Map([
      ["--cluster", { takesValue: true, mandatory: true }],
      ["--drain-ms", { takesValue: true, mandatory: false }],
    ]),
  },
};

/** A command's long options as the CLI registers them. */
function specOf(cmd: Command): ServeCommandSpec {
  return { options: new Map(cmd.options.filter((op) => op.long !== undefined).map((op) => [op.long as string, { takesValue: op.required || op.optional, mandatory: op.mandatory }])) };
}

/** The `arbor serve` subcommands as the CLI registers them (with their long options). */
function serveCommands(): Map<string, ServeCommandSpec> {
  const program = new Command();
  registerServeCommands(program);
  const serve = program.commands.find((c) => c.name() === "serve");
  const out = new Map<string, ServeCommandSpec>();
  for (const sub of serve?.commands ?? []) out.set(sub.name(), specOf(sub));
  for (const [name, spec] of Object.entries(AWAITED_SERVE_COMMANDS)) if (!out.has(name)) out.set(name, spec);
  return out;
}

function kustomizationDirs(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...kustomizationDirs(p));
    else if (e === "kustomization.yaml") out.push(dir);
  }
  return out.sort();
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = join(dir, e);
    return statSync(p).isDirectory() ? yamlFiles(p) : /\.ya?ml$/.test(e) ? [p] : [];
  });
}

/** `arbor run` as the CLI registers it. */
function runCommand(): ServeCommandSpec {
  const program = new Command();
  registerRunCommand(program);
  return specOf(program.commands[0] as Command);
}

const options: ManifestCheckOptions = {
  serveCommands: serveCommands(),
  runCommand: runCommand(),
  sandboxProviderSource: readFileSync(join(REPO, "src/sandbox/k8s.ts"), "utf8"),
};

async function allProblems(objects: K8sObject[]): Promise<string[]> {
  const schema = (await Promise.all(objects.map((o) => k8sSchemaProblems(o)))).flat();
  return [...schema, ...arborManifestProblems(objects, options)];
}

const clone = (b: KustomizeBuild): K8sObject[] => structuredClone(b.objects);
const find = (objects: K8sObject[], kind: string, name: string): K8sObject => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in the build`);
  return o;
};
// Typed reach into a manifest for the mutations below.
type Pod = { spec: { terminationGracePeriodSeconds?: number; containers: Record<string, unknown>[] } };
const podOf = (o: K8sObject): Pod["spec"] => ((o.spec as { template: Pod }).template.spec);
const container0 = (o: K8sObject): Record<string, unknown> & { args: string[] } => podOf(o).containers[0] as Record<string, unknown> & { args: string[] };

const dirs = kustomizationDirs(K8S_DIR);
const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;

describe("deploy/k8s manifests", () => {
  it("has the base and the cpu-dev overlay", () => {
    expect(dirs.map((d) => relative(K8S_DIR, d))).toEqual(["base", "overlays/cpu-dev"]);
  });

  it("uses every YAML file under deploy/k8s in a kustomization, and lists only files that exist", () => {
    const used = new Set<string>();
    for (const d of dirs) for (const f of buildKustomization(d).files) used.add(f);
    const unused = yamlFiles(K8S_DIR).filter((f) => !used.has(f)).map((f) => relative(REPO, f));
    expect(unused).toEqual([]);
  });

  for (const dir of dirs) {
    const name = relative(K8S_DIR, dir);
    it(`${name}: every object is valid and the deployment is consistent`, async () => {
      const build = buildKustomization(dir);
      expect(build.objects.length).toBeGreaterThan(10);
      expect(await allProblems(build.objects)).toEqual([]);
    });

    it.skipIf(!kubectl)(`${name}: kubectl kustomize renders the same objects, valid and consistent`, async () => {
      const out = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 16 << 20 });
      const rendered = out.split(/^---$/m).map((d) => parseYaml(d) as K8sObject | null).filter((d): d is K8sObject => d !== null);
      // kustomize suffixes generated names with a content hash and rewrites the references to them.
      const ids = (objs: K8sObject[], strip: boolean): string[] =>
        objs.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${strip && (o.kind === "ConfigMap" || o.kind === "Secret") ? o.metadata.name.replace(/-[a-z0-9]{10}$/, "") : o.metadata.name}`).sort();
      expect(ids(rendered, true)).toEqual(ids(buildKustomization(dir).objects, false));
      expect(await allProblems(rendered)).toEqual([]);
    });
  }

  it("builds the arbor image from files that exist, with the CLI as entrypoint and the models the cluster files serve", () => {
    const lines = readFileSync(join(REPO, "deploy/Dockerfile"), "utf8").split("\n").map((l) => l.trim());
    // The final stage: what runs in the pods.
    const final = lines.slice(lines.map((l) => l.startsWith("FROM ")).lastIndexOf(true));
    expect(final[0]).toMatch(/^FROM node:20-bookworm-slim$/);
    expect(final).toContain('ENTRYPOINT ["node", "bin/arbor.mjs"]');
    const workdir = final.filter((l) => l.startsWith("WORKDIR ")).pop()?.slice("WORKDIR ".length);
    expect(workdir).toBe("/app");
    const copied = final.filter((l) => l.startsWith("COPY ") && !l.includes("--from=")).flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(copied.filter((src) => !statSync(join(REPO, src), { throwIfNoEntry: false }))).toEqual([]);
    for (const bin of ["bin", "package.json"]) expect(copied).toContain(bin);
    // The compiled JavaScript comes from the build stage (bin/arbor.mjs runs dist/ where there is no src/).
    expect(final).toContain("COPY --from=deps /app/dist ./dist");
    expect(copied).not.toContain("src");
    for (const dir of dirs) {
      const cm = buildKustomization(dir).objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "arbor-config");
      const cluster = parseYaml((cm?.data as Record<string, string>)["cluster.yaml"] as string) as { model?: { path?: string } };
      const path = cluster.model?.path;
      if (path === undefined || path.startsWith("/")) continue;
      // A relative model path is read from the working directory, /app: it must be copied into the image.
      expect(copied.some((src) => path === src || path.startsWith(`${src.replace(/\/$/, "")}/`)), `${relative(REPO, dir)}: model.path ${path} is not in the image`).toBe(true);
      expect(statSync(join(REPO, path)).isFile()).toBe(true);
    }
  });

  describe("fails on a broken manifest", () => {
    let base: KustomizeBuild | undefined;
    const problemsOf = async (mutate: (objects: K8sObject[]) => void): Promise<string> => {
      base ??= buildKustomization(BASE);
      const objects = clone(base);
      mutate(objects);
      return (await allProblems(objects)).join("\n");
    };

    it("a misspelt field", async () => {
      expect(await problemsOf((o) => ((find(o, "Deployment", "worker").spec as Record<string, unknown>).replica = 3))).toMatch(/Deployment worker: unknown field \/spec\/replica/);
    });

    it("a value of the wrong type", async () => {
      const p = await problemsOf((o) => (((container0(find(o, "Deployment", "gateway")).ports as { containerPort: unknown }[])[0] as { containerPort: unknown }).containerPort = "8100"));
      expect(p).toMatch(/Deployment gateway: .*containerPort must be integer/);
    });

    it("a readiness probe on another port than cluster.yaml's", async () => {
      const p = await problemsOf((o) => {
        const c = container0(find(o, "Deployment", "gateway"));
        (c.readinessProbe as { httpGet: { port: unknown } }).httpGet.port = 9999;
      });
      expect(p).toMatch(/Deployment gateway container gateway: the readiness probe's port is 9999 .* listens on 8100/);
    });

    it("a cluster.yaml port the containers do not expose", async () => {
      const p = await problemsOf((o) => {
        const cm = find(o, "ConfigMap", "arbor-config");
        const data = cm.data as Record<string, string>;
        const cfg = parseYaml(data["cluster.yaml"] as string) as { worker: { port: number } };
        cfg.worker.port = 8201;
        data["cluster.yaml"] = stringifyYaml(cfg);
      });
      expect(p).toMatch(/Deployment worker container worker: no containerPort 8201/);
      expect(p).toMatch(/liveness probe's port is http \(8200\), but the service listens on 8201/);
    });

    it("an invalid cluster.yaml and run.yaml", async () => {
      const p = await problemsOf((o) => {
        const data = find(o, "ConfigMap", "arbor-config").data as Record<string, string>;
        data["cluster.yaml"] = (data["cluster.yaml"] as string).replace("kind: postgres", "kind: sqlite");
        data["run.yaml"] = (data["run.yaml"] as string).replace("groupSize: 8", "groupSize: 0");
      });
      expect(p).toMatch(/invalid cluster file \/etc\/arbor\/cluster.yaml of Deployment gateway container gateway: store.kind: sqlite cannot be shared/);
      expect(p).toMatch(/invalid run config \/etc\/arbor\/run.yaml of Job orchestrator container orchestrator: rollout.groupSize/);
    });

    it("a command the CLI does not have, and an option it does not know", async () => {
      const p = await problemsOf((o) => {
        container0(find(o, "Deployment", "trainer-api")).args[1] = "trainer";
        container0(find(o, "Deployment", "gateway")).args.push("--drain", "10");
      });
      expect(p).toMatch(/`arbor serve trainer` is not a command \(arbor serve has engine, gateway/);
      expect(p).toMatch(/Deployment gateway container gateway: option --drain is not an option of this command/);
    });

    it("a grace period shorter than the drain", async () => {
      expect(await problemsOf((o) => (podOf(find(o, "Deployment", "worker")).terminationGracePeriodSeconds = 150))).toMatch(
        /Deployment worker container worker: terminationGracePeriodSeconds 150 is not longer than its drain \(--drain-ms 120000\) and the 30000 ms its aborted programs get to record their end/,
      );
    });

    it("a Service whose selector matches no pod", async () => {
      expect(await problemsOf((o) => ((find(o, "Service", "nats").spec as { selector: object }).selector = { "app.kubernetes.io/name": "nat" }))).toMatch(/Service nats: selector .* matches no workload/);
    });

    it("a worker Role without pods/exec", async () => {
      const p = await problemsOf((o) => {
        const role = find(o, "Role", "arbor-worker-sandboxes") as K8sObject & { rules: { resources: string[] }[] };
        role.rules = role.rules.filter((r) => !r.resources.includes("pods/exec"));
      });
      expect(p).toMatch(/service account arbor-worker may not create pods\/exec in namespace arbor/);
    });

    it("sandboxes in a namespace the workers are not in", async () => {
      const p = await problemsOf((o) => {
        const data = find(o, "ConfigMap", "arbor-config").data as Record<string, string>;
        data["run.yaml"] = (data["run.yaml"] as string).replace("namespace: arbor", "namespace: sandboxes");
      });
      expect(p).toMatch(/Deployment worker container worker: runs in namespace arbor, but run.yaml puts sandboxes in sandboxes/);
      expect(p).toMatch(/may not create pods in namespace sandboxes/);
    });

    it("a backend URL no Service answers, and an engine listening elsewhere than its Service targets", async () => {
      const p = await problemsOf((o) => {
        const data = find(o, "ConfigMap", "arbor-config").data as Record<string, string>;
        data["cluster.yaml"] = (data["cluster.yaml"] as string).replace("http://sglang:30000/v1", "http://sglang:30001/v1");
        const vllm = container0(find(o, "Deployment", "vllm"));
        vllm.args = vllm.args.map((a) => (a === "--port=8000" ? "--port=8001" : a));
      });
      expect(p).toMatch(/cluster file backends\[1\] \(sglang\).url: 'http:\/\/sglang:30001\/v1': Service sglang has no port 30001/);
      expect(p).toMatch(/Deployment vllm container vllm \(backend vllm\): --port 8001, but its Service targets 8000/);
    });

    it("a Secret key that is not generated", async () => {
      const p = await problemsOf((o) => {
        const env = container0(find(o, "Deployment", "gateway")).env as { valueFrom: { secretKeyRef: { key: string } } }[];
        (env[0] as { valueFrom: { secretKeyRef: { key: string } } }).valueFrom.secretKeyRef.key = "pasword";
      });
      expect(p).toMatch(/env PGPASSWORD reads key pasword of Secret postgres, which has password/);
    });
  });
});
