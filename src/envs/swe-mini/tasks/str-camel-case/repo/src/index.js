// tiny-case: convert strings between naming conventions.

/** "hello world" -> "Hello world" */
export function capitalize(s) {
  return s.length === 0 ? s : s[0].toUpperCase() + s.slice(1);
}

/** "foo-bar_baz qux" -> "fooBarBazQux" */
export function camelCase(s) {
  return s
    .trim()
    .toLowerCase()
    .replace(/[-_\s]+(.)?/g, (_, ch) => (ch ? ch.toUpperCase() : ""));
}

/** "fooBarBaz" -> "foo-bar-baz" */
export function kebabCase(s) {
  return s
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/[_\s]+/g, "-")
    .toLowerCase();
}
