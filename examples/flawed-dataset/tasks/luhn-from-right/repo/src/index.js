// card-check: Luhn checksum validation and check-digit generation.

function digits(s) {
  const clean = s.replace(/[\s-]/g, "");
  if (!/^\d+$/.test(clean)) throw new Error(`not a number: ${s}`);
  return [...clean].map(Number);
}

function luhnSum(ds) {
  let sum = 0;
  for (let k = 0; k < ds.length; k++) {
    let d = ds[ds.length - 1 - k];
    if (k % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum;
}

export function isValid(s) {
  return luhnSum(digits(s)) % 10 === 0;
}

export function checkDigit(s) {
  const sum = luhnSum([...digits(s), 0]);
  return (10 - (sum % 10)) % 10;
}
