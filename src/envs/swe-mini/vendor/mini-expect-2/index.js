// mini-expect 2.x: tiny expect() assertions on top of node:assert, with .not.
import assert from "node:assert/strict";

function matchers(actual, negate) {
  const check = (ok, message) => assert.ok(negate ? !ok : ok, negate ? `not: ${message}` : message);
  return {
    toBe: (expected) => check(Object.is(actual, expected), `expected ${String(actual)} to be ${String(expected)}`),
    toEqual: (expected) => {
      let equal = true;
      try {
        assert.deepEqual(actual, expected);
      } catch {
        equal = false;
      }
      check(equal, "expected values to be deeply equal");
    },
    toThrow: (pattern) => {
      let threw = false;
      try {
        actual();
      } catch (e) {
        threw = pattern === undefined || (pattern instanceof RegExp ? pattern.test(String(e?.message)) : true);
      }
      check(threw, "expected function to throw");
    },
  };
}

export function expect(actual) {
  return { ...matchers(actual, false), not: matchers(actual, true) };
}
