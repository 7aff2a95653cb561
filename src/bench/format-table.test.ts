import { describe, expect, it } from "vitest";
import { formatTable } from "./format-table.js";

describe("formatTable", () => {
  it("aligns text left and numbers right, with notes below", () => {
    const text = formatTable({
      title: "T",
      columns: ["case", "tok/s"],
      rows: [
        ["a", 1234.5],
        ["longer", 7],
      ],
      notes: ["source: x"],
    });
    expect(text.split("\n")).toEqual(["T", "case    tok/s", "------  -----", "a        1235", "longer      7", "  source: x"]);
  });
});
