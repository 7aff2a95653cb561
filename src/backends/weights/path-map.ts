// Where an engine on another host or in a container finds Arbor's checkpoints: Arbor writes them under its own
// directory, the engine mounts that directory elsewhere, so each path is rewritten by prefix before it is sent.
import { ArborError } from "../../core/errors.js";

/** Prefix rewrite: a path under `from` (Arbor's view) is sent as the same path under `to` (the engine's view). */
export interface PathMap {
  from: string;
  to: string;
}

/**
 * The path the engine sees for Arbor's `path`. Without a map the path is unchanged. With one, `path` must be
 * `from` itself or lie under it (on a path-segment boundary, so `/ckpt` does not match `/ckpt2`): a checkpoint
 * outside the shared directory cannot be seen by the engine, which is an error naming the engine.
 */
export function mapPath(engine: string, path: string, map: PathMap | undefined): string {
  if (!map) return path;
  const from = trimSlash(map.from);
  const to = trimSlash(map.to);
  if (path === from) return to;
  if (path.startsWith(`${from}/`)) return `${to}${path.slice(from.length)}`;
  throw new ArborError(`weight sync: engine ${engine}: checkpoint ${path} is outside pathMap.from ${map.from}, so the engine cannot see it`, "weight_sync");
}

function trimSlash(p: string): string {
  return p.length > 1 ? p.replace(/\/+$/, "") : p;
}
