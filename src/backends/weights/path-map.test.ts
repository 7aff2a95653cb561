// pathMap: the prefix rewrite from Arbor's checkpoint directory to an engine's mount of it.
import { describe, expect, it } from "vitest";
import { mapPath } from "./path-map.js";

describe("mapPath", () => {
  it("leaves paths unchanged without a map", () => {
    expect(mapPath("e", "/a/b", undefined)).toBe("/a/b");
  });

  it("rewrites the prefix on a path-segment boundary, with or without trailing slashes", () => {
    expect(mapPath("e", "/runs/x/ckpt/it1", { from: "/runs/x/ckpt", to: "/mnt/ckpt" })).toBe("/mnt/ckpt/it1");
    expect(mapPath("e", "/runs/x/ckpt/it1/model.gguf", { from: "/runs/x/ckpt/", to: "/mnt/ckpt/" })).toBe("/mnt/ckpt/it1/model.gguf");
    expect(mapPath("e", "/runs/x/ckpt", { from: "/runs/x/ckpt", to: "/mnt/ckpt" })).toBe("/mnt/ckpt");
  });

  it("refuses a path outside `from` (a sibling sharing the prefix included), naming the engine", () => {
    const map = { from: "/runs/x/ckpt", to: "/mnt/ckpt" };
    expect(() => mapPath("sgl-1", "/runs/x/ckpt2/it1", map)).toThrow(/sgl-1.*outside pathMap.from/);
    expect(() => mapPath("sgl-1", "/tmp/it1", map)).toThrow(expect.objectContaining({ code: "weight_sync" }));
  });
});
