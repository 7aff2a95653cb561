// Routing plugin registry: config names to filter and scorer factories, and the config-driven
// construction of a PluginRouter (`gateway.routing` in the run config; weights live there).
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { createCapacityFilter } from "./capacity-filter.js";
import { createCostAwareScorer } from "./cost-aware.js";
import { createHealthyFilter } from "./healthy-filter.js";
import { createKvUsageScorer } from "./kv-usage.js";
import { createLeastLoadScorer } from "./least-load.js";
import { PluginRouter } from "./plugin-router.js";
import { createPrefixAffinityScorer } from "./prefix-affinity.js";
import { createStickyProgramScorer } from "./sticky-program.js";
import type { RoutingFilter, RoutingScorer } from "./types.js";

/** Factories take their plugin's raw `options` object; each validates it with its own schema. */
type Factory<T> = (options: Record<string, unknown>) => T;

// Plugins without options still reject stray keys, so a typo is not silently ignored.
const NoOptions = z.object({}).strict();
function noOptions<T>(create: () => T): Factory<T> {
  return (o) => {
    NoOptions.parse(o);
    return create();
  };
}

const filterFactories: Record<string, Factory<RoutingFilter>> = {
  healthy: noOptions(createHealthyFilter),
  capacity: (o) => createCapacityFilter(o),
};

const scorerFactories: Record<string, Factory<RoutingScorer>> = {
  "least-load": noOptions(createLeastLoadScorer),
  "kv-usage": noOptions(createKvUsageScorer),
  "sticky-program": noOptions(createStickyProgramScorer),
  "prefix-affinity": (o) => createPrefixAffinityScorer(o),
  "cost-aware": (o) => createCostAwareScorer(o),
};

/** Names accepted in `gateway.routing.filters`. */
export const routingFilterNames: readonly string[] = Object.keys(filterFactories);
/** Names accepted in `gateway.routing.scorers`. */
export const routingScorerNames: readonly string[] = Object.keys(scorerFactories);

const options = z.record(z.string(), z.unknown()).default({});

export const RoutingConfigSchema = z
  .object({
    filters: z
      .array(z.union([z.string(), z.object({ name: z.string(), options }).strict()]))
      .default(["healthy", "capacity"]),
    scorers: z
      .array(z.object({ name: z.string(), weight: z.number().positive().finite().default(1), options }).strict())
      .min(1)
      .default([{ name: "least-load", weight: 1, options: {} }]),
    prefixTreeMaxTokens: z.number().int().min(1).default(1 << 20),
    maxPrograms: z.number().int().min(1).default(100_000),
    maxInFlight: z.number().int().min(1).default(100_000),
  })
  .strict();
export type RoutingConfig = z.input<typeof RoutingConfigSchema>;

/** Create a filter by name; unknown names list the known ones, bad options name the field. */
export function createRoutingFilter(name: string, opts: Record<string, unknown> = {}, where = "gateway.routing.filters"): RoutingFilter {
  return build(filterFactories, "filter", name, opts, where);
}

/** Create a scorer by name; unknown names list the known ones, bad options name the field. */
export function createRoutingScorer(name: string, opts: Record<string, unknown> = {}, where = "gateway.routing.scorers"): RoutingScorer {
  return build(scorerFactories, "scorer", name, opts, where);
}

/** Build a {@link PluginRouter} for `backends` from a `gateway.routing` config block. */
export function createPluginRouter(backends: readonly string[], config: RoutingConfig = {}): PluginRouter {
  const parsed = RoutingConfigSchema.safeParse(config);
  if (!parsed.success) throw new ArborError(`gateway.routing${zodWhere(parsed.error)}`, "config");
  const c = parsed.data;
  const filters = c.filters.map((f, i) => {
    const { name, options: o } = typeof f === "string" ? { name: f, options: {} } : f;
    return createRoutingFilter(name, o, `gateway.routing.filters[${i}]`);
  });
  const scorers = c.scorers.map((s, i) => ({
    scorer: createRoutingScorer(s.name, s.options, `gateway.routing.scorers[${i}]`),
    weight: s.weight,
  }));
  return new PluginRouter({
    backends,
    filters,
    scorers,
    prefixTreeMaxTokens: c.prefixTreeMaxTokens,
    maxPrograms: c.maxPrograms,
    maxInFlight: c.maxInFlight,
  });
}

function build<T>(table: Record<string, Factory<T>>, kind: string, name: string, opts: Record<string, unknown>, where: string): T {
  const factory = Object.hasOwn(table, name) ? table[name] : undefined;
  if (!factory) {
    throw new ArborError(`${where}: unknown ${kind} '${name}' (known: ${Object.keys(table).join(", ")})`, "config");
  }
  try {
    return factory(opts);
  } catch (e) {
    if (e instanceof z.ZodError) throw new ArborError(`${where} (${name}).options${zodWhere(e)}`, "config");
    throw e;
  }
}

/** ".field.path: reason" for the first issue of a zod error. */
function zodWhere(e: z.ZodError): string {
  const issue = e.issues[0];
  if (issue === undefined) return ": invalid";
  const path = issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("");
  return `${path}: ${issue.message}`;
}

/**
 * The default preset, chosen by `arbor bench pausing`: sticky-program (least-loaded first call, then
 * the program stays where its KV is) had the best steps/min without pausing over both workloads —
 * ×1.02 oversubscribed, ×1.13 with ample KV, against least-load; cost-aware ×1.03 / ×1.06;
 * prefix-affinity ×0.90 / ×0.89 (it crowds programs sharing a system prompt onto one engine).
 */
export const DEFAULT_ROUTING = "sticky-program";

/** One-word routing presets accepted as `gateway.routing`: each is a single scorer behind the default filters. */
export const routingPresets: Record<string, RoutingConfig> = {
  "least-load": { scorers: [{ name: "least-load", weight: 1 }] },
  "kv-usage": { scorers: [{ name: "kv-usage", weight: 1 }] },
  "sticky-program": { scorers: [{ name: "sticky-program", weight: 1 }] },
  "prefix-affinity": { scorers: [{ name: "prefix-affinity", weight: 1 }] },
  "cost-aware": { scorers: [{ name: "cost-aware", weight: 1 }] },
};

/**
 * Throws the error the gateway would give `routing` (an unknown preset, filter or scorer, bad options) at its
 * start: `arbor run` checks it before it starts engines.
 */
export function checkRoutingConfig(routing: string | RoutingConfig | undefined): void {
  createPluginRouter(["check"], resolveRoutingConfig(routing));
}

/** A `gateway.routing` value: a preset name or a full {@link RoutingConfig}. */
export function resolveRoutingConfig(routing: string | RoutingConfig | undefined): RoutingConfig {
  if (routing === undefined) return routingPresets[DEFAULT_ROUTING] as RoutingConfig;
  if (typeof routing !== "string") return routing;
  const preset = Object.hasOwn(routingPresets, routing) ? routingPresets[routing] : undefined;
  if (!preset) {
    throw new ArborError(`gateway.routing: unknown preset '${routing}' (known: ${Object.keys(routingPresets).join(", ")}; or give {filters, scorers})`, "config");
  }
  return preset;
}
