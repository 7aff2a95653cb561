// mustache-lite: replace {{ path }} placeholders with values from a context object.

export function render(template, ctx) {
  return template.replace(/\{\{\s*([\w.]+)\s*\}\}/g, (_, path) => {
    let v = ctx;
    for (const key of path.split(".")) v = v == null ? undefined : v[key];
    return v == null ? "" : String(v);
  });
}
