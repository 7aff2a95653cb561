// pretty-size: human-readable byte sizes (binary units).

const UNITS = ["B", "KB", "MB", "GB", "TB"];

export function formatBytes(n, decimals = 1) {
  if (!Number.isFinite(n) || n < 0) throw new RangeError("n must be a finite number >= 0");
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) {
    n /= 1024;
    i++;
  }
  const text = i === 0 ? String(n) : n.toFixed(decimals).replace(/\.0+$/, "");
  return `${text} ${UNITS[i]}`;
}
