import { describe, expect, it } from "vitest";
import { programRowInsert } from "./postgres-program-rows.js";

describe("programRowInsert", () => {
  it("guards the insert by the program its program_id value names being active, with the tail after both forms", () => {
    const i = programRowInsert("calls", ["id", "program_id", "idx"], "ON CONFLICT DO NOTHING RETURNING id");
    expect(i.programAt).toBe(1);
    expect(i.ifActive).toBe(
      "INSERT INTO calls (id, program_id, idx) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM programs WHERE id = $2 AND termination_kind IS NULL FOR SHARE) ON CONFLICT DO NOTHING RETURNING id",
    );
    expect(i.plain).toBe("INSERT INTO calls (id, program_id, idx) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING id");
    expect(programRowInsert("tools", ["program_id", "tool"]).plain).toBe("INSERT INTO tools (program_id, tool) VALUES ($1, $2)");
    expect(() => programRowInsert("runs", ["id"])).toThrow("programRowInsert runs: no program_id column");
  });
});
