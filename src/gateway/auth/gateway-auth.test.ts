import { describe, expect, it } from "vitest";
import { GatewayRejection } from "./auth-errors.js";
import { credentialOf, GatewayAuth } from "./gateway-auth.js";
import { ProgramKeyTable } from "./key-table.js";

const ADMIN = "0123456789abcdef-admin";

function statusOf(fn: () => void): number | "ok" {
  try {
    fn();
    return "ok";
  } catch (e) {
    if (e instanceof GatewayRejection) return e.status;
    throw e;
  }
}

describe("GatewayAuth", () => {
  it("reads Bearer and x-api-key credentials", () => {
    expect(credentialOf({ authorization: "Bearer abc" })).toBe("abc");
    expect(credentialOf({ authorization: "bearer  abc " })).toBe("abc");
    expect(credentialOf({ authorization: "Basic abc" })).toBeUndefined();
    expect(credentialOf({ "x-api-key": "k" })).toBe("k");
    expect(credentialOf({})).toBeUndefined();
  });

  it("decides admin, own-program, other-program and anonymous access", () => {
    const keys = new ProgramKeyTable();
    const a = keys.issue("a");
    const strict = new GatewayAuth({ adminToken: ADMIN, requireProgramKeys: true }, keys);
    const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
    expect(statusOf(() => strict.requireAdmin(bearer(ADMIN)))).toBe("ok");
    expect(statusOf(() => strict.requireAdmin(bearer(a)))).toBe(403);
    expect(statusOf(() => strict.requireAdmin({}))).toBe(401);
    expect(statusOf(() => strict.requireAdmin(bearer(ADMIN + "x")))).toBe(401);
    expect(statusOf(() => strict.requireCaller(bearer(a), "a"))).toBe("ok");
    expect(statusOf(() => strict.requireCaller({ "x-api-key": a }, "a"))).toBe("ok");
    expect(statusOf(() => strict.requireCaller(bearer(a), "b"))).toBe(403);
    expect(statusOf(() => strict.requireCaller({}, "b"))).toBe(401);
    expect(statusOf(() => strict.requireProgramReader(bearer(ADMIN), "b"))).toBe("ok");
    expect(statusOf(() => strict.requireProgramReader(bearer(a), "b"))).toBe(403);
    expect(statusOf(() => strict.requireAnyCaller({}))).toBe(401);

    const lax = new GatewayAuth({ adminToken: ADMIN, requireProgramKeys: false }, keys);
    expect(statusOf(() => lax.requireCaller({}, "unkeyed"))).toBe("ok");
    expect(statusOf(() => lax.requireCaller({}, "a"))).toBe(401);
    expect(statusOf(() => lax.requireAnyCaller({}))).toBe("ok");
  });

  it("rejects a weak admin token", () => {
    expect(() => new GatewayAuth({ adminToken: "short", requireProgramKeys: true }, new ProgramKeyTable())).toThrow(/adminToken/);
  });
});
