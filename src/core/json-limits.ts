// Bounds on the shape of a parsed JSON request body, checked before anything recursive touches it.
// JSON.parse accepts any nesting, but JSON.stringify, zod and renderers recurse: a body nesting
// ~50,000 arrays overflows their stacks. The walk here is iterative, so the check itself cannot
// overflow, and the violation names the field (e.g. `tools[0].function.parameters[0][0]…`).

/** Limits on a request body's shape. */
export interface JsonShapeLimits {
  /** Deepest nesting of objects and arrays (the body itself is depth 1). */
  maxDepth: number;
  /** Most items of any one array (bounds what a renderer spreads onto its stack). */
  maxArrayItems: number;
}

/** Default shape limits of Arbor's HTTP servers: deep enough for any real JSON Schema, far from a stack overflow. */
export const DEFAULT_JSON_LIMITS: JsonShapeLimits = { maxDepth: 64, maxArrayItems: 1_000_000 };

/** The first limit a body breaks: the field (OpenAI-style path) and why. */
export interface JsonShapeViolation {
  param: string;
  reason: string;
}

interface Node {
  value: unknown;
  depth: number;
  parent: Node | undefined;
  key: string | number | undefined;
}

const MAX_PARAM_CHARS = 160;

/** The first violation of `limits` in `value` (depth-first, in document order), or undefined. */
export function jsonShapeViolation(value: unknown, limits: JsonShapeLimits = DEFAULT_JSON_LIMITS): JsonShapeViolation | undefined {
  const stack: Node[] = [{ value, depth: 1, parent: undefined, key: undefined }];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    const v = node.value;
    if (typeof v !== "object" || v === null) continue;
    if (node.depth > limits.maxDepth) {
      return { param: pathOf(node), reason: `nested more than ${limits.maxDepth} levels deep (objects and arrays)` };
    }
    if (Array.isArray(v)) {
      if (v.length > limits.maxArrayItems) {
        return { param: pathOf(node), reason: `has ${v.length} items, more than the limit of ${limits.maxArrayItems}` };
      }
      // Pushed in reverse so that the pops visit the items in document order.
      for (let i = v.length - 1; i >= 0; i--) {
        const item: unknown = v[i];
        if (typeof item === "object" && item !== null) stack.push({ value: item, depth: node.depth + 1, parent: node, key: i });
      }
    } else {
      const entries = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, item] = entries[i] as [string, unknown];
        if (typeof item === "object" && item !== null) stack.push({ value: item, depth: node.depth + 1, parent: node, key: k });
      }
    }
  }
  return undefined;
}

/** `messages[0].content` for the node; a very deep path keeps its head and says how much it left out. */
function pathOf(node: Node): string {
  const keys: (string | number)[] = [];
  for (let n: Node | undefined = node; n?.key !== undefined; n = n.parent) keys.push(n.key);
  keys.reverse();
  let out = "";
  for (const [i, k] of keys.entries()) {
    const part = typeof k === "number" ? `[${k}]` : out === "" ? k : `.${k}`;
    if (out.length + part.length > MAX_PARAM_CHARS) return `${out}… (${keys.length - i} more levels)`;
    out += part;
  }
  return out === "" ? "body" : out;
}
