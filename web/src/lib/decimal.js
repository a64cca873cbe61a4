// Exact decimal arithmetic on the API's decimal strings ("0.01000000"):
// values are BigInt counts of 10^-SCALE (every asset has scale 8), so a tick,
// a lot step or a balance check never meets a binary rounding error.

export const SCALE = 8;
const P = 10n ** BigInt(SCALE);

// The units of a decimal string; null when it is not one (or has more than
// SCALE decimals).
export function parse(text) {
  const m = /^\s*(\d*)(?:\.(\d*))?\s*$/.exec(String(text ?? ''));
  if (!m || (m[1] === '' && (m[2] ?? '') === '')) return null;
  const frac = (m[2] ?? '').replace(/0+$/, '');
  if (frac.length > SCALE) return null;
  return BigInt(m[1] || '0') * P + BigInt((frac + '0'.repeat(SCALE)).slice(0, SCALE) || '0');
}

// The shortest decimal text of units; `places`: at least that many decimals.
export function format(units, places = 0) {
  const neg = units < 0n;
  const a = neg ? -units : units;
  let frac = (a % P).toString().padStart(SCALE, '0').replace(/0+$/, '');
  if (frac.length < places) frac = frac.padEnd(places, '0');
  return (neg ? '-' : '') + (a / P).toString() + (frac ? '.' + frac : '');
}

// Decimals a step needs ("0.01000000" -> 2); remembered per step text.
const placesByStep = new Map();
export function placesOf(step) {
  let n = placesByStep.get(step);
  if (n === undefined) {
    const u = parse(step);
    n = u === null || u === 0n ? 0 : (format(u).split('.')[1] ?? '').length;
    placesByStep.set(step, n);
  }
  return n;
}

// a * b / 10^SCALE, rounded down: a price times a quantity.
export function mul(a, b) {
  return (a * b) / P;
}


// The text of a decimal string with at least `places` decimals and no
// trailing zeros beyond them ("30000.00000000", 2 -> "30000.00").
export function fixed(text, places) {
  const u = parse(text);
  if (u === null) return String(text);
  return format(u, places);
}
