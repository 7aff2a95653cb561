// Min-max normalisation of raw per-backend numbers into [0, 1] scores, as llm-d's scorers do, so
// that scorers with different units can be combined by weight.

/** 1 for the lowest value, 0 for the highest, linear between; all equal → all 1. */
export function lowerIsBetter(values: readonly number[]): number[] {
  const min = Math.min(...values);
  const max = Math.max(...values);
  if (!(max > min)) return values.map(() => 1);
  return values.map((v) => (max - v) / (max - min));
}

/** 1 for the highest value, 0 for the lowest, linear between; all equal → all 1. */
export function higherIsBetter(values: readonly number[]): number[] {
  const min = Math.min(...values);
  const max = Math.max(...values);
  if (!(max > min)) return values.map(() => 1);
  return values.map((v) => (v - min) / (max - min));
}
