import { describe, expect, it } from "vitest";
import { hashSecret, PROGRAM_KEY_PREFIX, ProgramKeyTable, secretsEqual } from "./key-table.js";

describe("ProgramKeyTable", () => {
  it("mints a 32-byte random key per program and maps it back to its program only", () => {
    const t = new ProgramKeyTable();
    const a = t.issue("a");
    const b = t.issue("b");
    expect(a.startsWith(PROGRAM_KEY_PREFIX)).toBe(true);
    expect(Buffer.from(a.slice(PROGRAM_KEY_PREFIX.length), "base64url")).toHaveLength(32);
    expect(a).not.toBe(b);
    expect(t.programOf(a)).toBe("a");
    expect(t.programOf(b)).toBe("b");
    expect(t.programOf(a + "x")).toBeUndefined();
    expect(t.programOf("")).toBeUndefined();
    expect(t.hasKey("a")).toBe(true);
    expect(t.hasKey("c")).toBe(false);
  });

  it("stores only hashes: the key appears nowhere in the table", () => {
    const t = new ProgramKeyTable();
    const key = t.issue("p");
    const dump = JSON.stringify(Object.entries(t).map(([k, v]) => [k, v instanceof Map || v instanceof Set ? [...v] : v]));
    expect(dump).not.toContain(key);
    expect(dump).toContain(hashSecret(key));
  });

  it("refuses a second key for the same program and a full table", () => {
    const t = new ProgramKeyTable({ maxKeys: 2 });
    t.issue("a");
    expect(() => t.issue("a")).toThrow(/already has an API key/);
    t.issue("b");
    expect(() => t.issue("c")).toThrow(/full \(limit 2\)/);
    t.release("a");
    expect(t.issue("c")).toMatch(/^arbor-pk-/);
  });

  it("keeps released keys readable until maxReleased later releases push them out", () => {
    const t = new ProgramKeyTable({ maxReleased: 1 });
    const a = t.issue("a");
    const b = t.issue("b");
    t.release("a");
    t.release("a");
    expect(t.programOf(a)).toBe("a");
    t.release("b");
    expect(t.programOf(a)).toBeUndefined();
    expect(t.hasKey("a")).toBe(false);
    expect(t.programOf(b)).toBe("b");
    t.release("never-keyed");
    expect(t.size).toBe(1);
  });

  it("uses injected random bytes and rejects a wrong length or a repeated key", () => {
    const t = new ProgramKeyTable({ randomBytes: (len) => Buffer.alloc(len, 1) });
    expect(t.issue("a")).toBe(PROGRAM_KEY_PREFIX + Buffer.alloc(32, 1).toString("base64url"));
    expect(() => t.issue("b")).toThrow(/already in use/);
    expect(() => new ProgramKeyTable({ randomBytes: () => Buffer.alloc(8) }).issue("x")).toThrow(/32 bytes/);
    expect(() => new ProgramKeyTable({ maxKeys: 0 })).toThrow(/maxKeys/);
  });

  it("compares secrets by value", () => {
    expect(secretsEqual("abc", "abc")).toBe(true);
    expect(secretsEqual("abc", "abd")).toBe(false);
    expect(secretsEqual("abc", "abcd")).toBe(false);
  });
});

describe("ProgramKeyTable with a secret (restartable gateways)", () => {
  it("derives each program's key from the secret, so a new table restores it; other secrets and ids do not match", () => {
    const first = new ProgramKeyTable({ secret: "admin-token-0123456789" });
    const key = first.issue("p1");
    expect(key.startsWith(PROGRAM_KEY_PREFIX)).toBe(true);
    expect(first.issue("p2")).not.toBe(key);
    const restarted = new ProgramKeyTable({ secret: "admin-token-0123456789" });
    expect(restarted.programOf(key)).toBeUndefined();
    restarted.restore("p1");
    expect(restarted.programOf(key)).toBe("p1");
    restarted.restore("p1");
    expect(restarted.size).toBe(1);
    const other = new ProgramKeyTable({ secret: "another-admin-token-99" });
    other.restore("p1");
    expect(other.programOf(key)).toBeUndefined();
  });

  it("cannot restore without the secret", () => {
    expect(() => new ProgramKeyTable().restore("p1")).toThrow(/restoring needs the key secret/);
  });
});
