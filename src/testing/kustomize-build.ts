// A small Kustomize build for the manifest tests, so they run where no kubectl is installed: resources
// (files and directories with their own kustomization.yaml), configMapGenerator and secretGenerator (files,
// literals; behavior create/replace/merge), delete patches (`$patch: delete`), `namespace` and `labels`.
// Generated names keep no hash suffix. Anything else a kustomization.yaml holds is refused by name, so a
// manifest this build does not understand fails the test instead of being half-read.
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

/** One Kubernetes object as YAML gives it. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

/** The objects a kustomization renders, and every file it (and the ones it includes) read. */
export interface KustomizeBuild {
  objects: K8sObject[];
  /** Absolute paths of every file read: kustomization.yaml files, resources, generator files, patches. */
  files: Set<string>;
}

/** Kinds that live outside any namespace (the namespace transformer leaves them alone). */
const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass", "CustomResourceDefinition", "PriorityClass", "RuntimeClass"]);

const KNOWN_FIELDS = new Set(["apiVersion", "kind", "namespace", "labels", "resources", "configMapGenerator", "secretGenerator", "patches"]);

interface Generator {
  name: string;
  behavior?: "create" | "replace" | "merge";
  files?: string[];
  literals?: string[];
}

/** Parse every YAML document of `path` (empty documents dropped); errors name the file. */
export function readYamlDocuments(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, "utf8"));
  const out: unknown[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${path}: YAML: ${d.errors[0]?.message ?? "syntax error"}`);
    const v: unknown = d.toJSON();
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

function asObject(v: unknown, where: string): K8sObject {
  const o = v as Partial<K8sObject> | null;
  if (!o || typeof o !== "object" || typeof o.apiVersion !== "string" || typeof o.kind !== "string" || typeof o.metadata?.name !== "string") {
    throw new Error(`${where}: not a Kubernetes object (needs apiVersion, kind and metadata.name)`);
  }
  return o as K8sObject;
}

const sameObject = (a: K8sObject, b: { kind: string; metadata: { name: string } }): boolean => a.kind === b.kind && a.metadata.name === b.metadata.name;

/** Build the kustomization in `dir` (the directory holding kustomization.yaml). */
export function buildKustomization(dir: string): KustomizeBuild {
  const root = resolve(dir);
  const kfile = join(root, "kustomization.yaml");
  if (!existsSync(kfile)) throw new Error(`${root}: no kustomization.yaml`);
  const files = new Set<string>([kfile]);
  const [raw] = readYamlDocuments(kfile) as [Record<string, unknown> | undefined];
  if (!raw || typeof raw !== "object") throw new Error(`${kfile}: empty`);
  for (const k of Object.keys(raw)) if (!KNOWN_FIELDS.has(k)) throw new Error(`${kfile}: field '${k}' is not understood by this build (src/testing/kustomize-build.ts)`);
  const need = (rel: string, field: string): string => {
    const p = resolve(root, rel);
    if (!existsSync(p)) throw new Error(`${kfile}: ${field} '${rel}' does not exist`);
    return p;
  };

  let objects: K8sObject[] = [];
  for (const rel of (raw.resources as string[] | undefined) ?? []) {
    const p = need(rel, "resources");
    if (statSync(p).isDirectory()) {
      const sub = buildKustomization(p);
      objects.push(...sub.objects);
      for (const f of sub.files) files.add(f);
    } else {
      files.add(p);
      readYamlDocuments(p).forEach((d, i) => objects.push(asObject(d, `${p} document ${i + 1}`)));
    }
  }

  const generate = (field: "configMapGenerator" | "secretGenerator", kind: "ConfigMap" | "Secret"): void => {
    for (const g of (raw[field] as Generator[] | undefined) ?? []) {
      const data: Record<string, string> = {};
      for (const rel of g.files ?? []) {
        const p = need(rel, `${field} ${g.name} files`);
        files.add(p);
        data[basename(p)] = readFileSync(p, "utf8");
      }
      for (const lit of g.literals ?? []) {
        const eq = lit.indexOf("=");
        if (eq <= 0) throw new Error(`${kfile}: ${field} ${g.name}: literal '${lit}' is not key=value`);
        data[lit.slice(0, eq)] = lit.slice(eq + 1);
      }
      // Secrets carry base64 `data` as kustomize writes them; ConfigMaps plain text.
      const encoded = kind === "Secret" ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])) : data;
      const existing = objects.find((o) => sameObject(o, { kind, metadata: { name: g.name } }));
      const behavior = g.behavior ?? "create";
      if (behavior === "create") {
        if (existing) throw new Error(`${kfile}: ${field} ${g.name}: a ${kind} of that name exists (use behavior: replace or merge)`);
        objects.push({ apiVersion: "v1", kind, metadata: { name: g.name }, data: encoded });
      } else {
        if (!existing) throw new Error(`${kfile}: ${field} ${g.name}: behavior ${behavior} needs a ${kind} of that name from the resources`);
        existing.data = behavior === "replace" ? encoded : { ...(existing.data as Record<string, string>), ...encoded };
      }
    }
  };
  generate("configMapGenerator", "ConfigMap");
  generate("secretGenerator", "Secret");

  for (const patch of (raw.patches as { path?: string }[] | undefined) ?? []) {
    if (patch.path === undefined) throw new Error(`${kfile}: patches: only patches given by path are understood by this build`);
    const p = need(patch.path, "patches");
    files.add(p);
    for (const [i, d] of readYamlDocuments(p).entries()) {
      const target = asObject(d, `${p} document ${i + 1}`);
      if (target.$patch !== "delete") throw new Error(`${p}: only \`$patch: delete\` patches are understood by this build`);
      const before = objects.length;
      objects = objects.filter((o) => !sameObject(o, target));
      if (objects.length === before) throw new Error(`${p}: deletes ${target.kind} ${target.metadata.name}, which the resources do not have`);
    }
  }

  const ns = raw.namespace as string | undefined;
  const labels = ((raw.labels as { pairs?: Record<string, string> }[] | undefined) ?? []).reduce<Record<string, string>>((acc, l) => ({ ...acc, ...l.pairs }), {});
  for (const o of objects) {
    if (ns !== undefined && !CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = ns;
    // As kustomize: a Namespace object becomes the namespace the kustomization sets.
    if (ns !== undefined && o.kind === "Namespace") o.metadata.name = ns;
    // As kustomize: a RoleBinding's service-account subjects follow the namespace they are deployed in.
    if (ns !== undefined && (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding")) {
      for (const s of (o.subjects as { kind: string; namespace?: string }[] | undefined) ?? []) if (s.kind === "ServiceAccount") s.namespace = ns;
    }
    if (Object.keys(labels).length > 0) o.metadata.labels = { ...o.metadata.labels, ...labels };
  }
  return { objects, files };
}
