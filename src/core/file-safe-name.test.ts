import { describe, expect, it } from "vitest";
import { fileSafeName } from "./file-safe-name.js";

describe("fileSafeName", () => {
  it("keeps letters, digits, '.', '_' and '-', and makes everything else '_'", () => {
    expect(fileSafeName("run-2026-12-07T19-15-37.361Z_a")).toBe("run-2026-12-07T19-15-37.361Z_a");
    expect(fileSafeName("run/a:b c@é")).toBe("run_a_b_c__");
  });
});
