// Validate a Kubernetes object against the API's OpenAPI schemas (the `kubernetes-models` package: one class
// per apiVersion/kind, whose validate() throws naming the bad field), and find the fields the schema does
// not know. The generated validators accept unknown fields (the API server would prune or, with strict
// field validation, refuse them), so a misspelt field (`replica:`, `readinesProbe:`) would pass silently:
// the object is validated once more through a proxy that records every property the validator reads, and
// a key it never reads, in an object it did not iterate as a map (labels, data, resources), is unknown.
import type { K8sObject } from "./kustomize-build.js";

type ValidateFn = (this: unknown) => void;

/** The validate function of apiVersion/kind's model class (`kubernetes-models/<apiVersion>/<kind>`). */
async function validatorOf(apiVersion: string, kind: string): Promise<ValidateFn | undefined> {
  if (!/^[a-z0-9.]+(\/[a-z0-9]+)?$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind)) return undefined;
  try {
    // The module path is computed, so the bundler must not try to resolve it ahead.
    const specifier = `kubernetes-models/${apiVersion}/${kind}`;
    const mod = (await import(/* @vite-ignore */ specifier)) as Record<string, { prototype: { validate: ValidateFn } } | undefined>;
    return mod[kind]?.prototype.validate;
  } catch {
    return undefined;
  }
}

/** `value` behind a proxy that adds each property path read to `read` and each iterated object's path to `maps`. */
function tracked(value: unknown, path: string, read: Set<string>, maps: Set<string>): unknown {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value, {
    get(t, k, r) {
      const v: unknown = Reflect.get(t, k, r);
      if (typeof k !== "string") return v;
      read.add(`${path}/${k}`);
      return tracked(v, `${path}/${k}`, read, maps);
    },
    has(t, k) {
      if (typeof k === "string") read.add(`${path}/${k}`);
      return Reflect.has(t, k);
    },
    ownKeys(t) {
      maps.add(path);
      return Reflect.ownKeys(t);
    },
  });
}

function unreadKeys(value: unknown, path: string, read: Set<string>, maps: Set<string>, out: string[]): void {
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unreadKeys(v, `${path}/${i}`, read, maps, out));
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    const p = `${path}/${k}`;
    if (!maps.has(path) && !read.has(p)) out.push(p);
    else unreadKeys(v, p, read, maps, out);
  }
}

/**
 * Problems of `obj` against the Kubernetes API schema of its apiVersion/kind: the validator's error, or
 * one line per unknown field (`Deployment gateway: unknown field /spec/replica`). Empty when valid.
 */
export async function k8sSchemaProblems(obj: K8sObject): Promise<string[]> {
  const what = `${obj.kind} ${obj.metadata.name}`;
  const validate = await validatorOf(obj.apiVersion, obj.kind);
  if (!validate) return [`${what}: no Kubernetes schema for apiVersion ${obj.apiVersion}, kind ${obj.kind}`];
  try {
    validate.call(obj);
  } catch (e) {
    return [`${what}: ${(e as Error).message}`];
  }
  const read = new Set<string>();
  const maps = new Set<string>();
  validate.call(tracked(obj, "", read, maps));
  const unknown: string[] = [];
  unreadKeys(obj, "", read, maps, unknown);
  return unknown.map((p) => `${what}: unknown field ${p}`);
}
