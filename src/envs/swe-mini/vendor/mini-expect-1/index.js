// mini-expect 1.x: tiny expect() assertions on top of node:assert.
import assert from "node:assert/strict";

export function expect(actual) {
  return {
    toBe: (expected) => assert.equal(actual, expected),
    toEqual: (expected) => assert.deepEqual(actual, expected),
    toThrow: (pattern) => assert.throws(actual, pattern),
  };
}
