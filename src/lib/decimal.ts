/*
 * Money is decimal text. These helpers compare and convert amounts without ever doing arithmetic in
 * floating point.
 */

const DECIMAL = /^([+-]?)(\d+)(?:\.(\d+))?$/;

/** Canonical form: no sign on zero, no leading zeros, no trailing fractional zeros. Undefined if not a decimal. */
export function normalizeDecimal(text: string): string | undefined {
  const match = DECIMAL.exec(text.trim());
  if (!match) return undefined;
  const [, sign = '', whole = '', fraction = ''] = match;
  const intPart = whole.replace(/^0+(?=\d)/, '');
  const fracPart = fraction.replace(/0+$/, '');
  const body = fracPart ? `${intPart}.${fracPart}` : intPart;
  const isZero = /^0(\.0*)?$/.test(body);
  return isZero ? '0' : `${sign === '-' ? '-' : ''}${body}`;
}

/** Whether two decimal texts denote the same amount ("0.50000000" equals "0.5"). */
export function decimalEquals(a: string, b: string): boolean {
  const na = normalizeDecimal(a);
  return na !== undefined && na === normalizeDecimal(b);
}

/**
 * Decimal text of a JSON number as upstream wrote it (upstream API 2.4 sends `amount` as a number).
 * JavaScript prints the shortest text that reads back as the same double, which for amounts of up to
 * 15 significant digits is the text upstream sent; exponent forms (1e-7, 1e21) are expanded by hand.
 */
export function decimalFromNumber(value: number): string {
  if (!Number.isFinite(value)) throw new RangeError('amount is not a finite number');
  return decimalFromNumberText(String(value))!;
}

/**
 * Decimal text of a JSON number's own text (`12345678901234.567891`, `1.5e-7`, `2E+3`), digit for digit,
 * with the exponent expanded by moving the point: no float is involved, so 20 significant digits stay
 * 20 significant digits. Undefined when the text is not a JSON number.
 */
export function decimalFromNumberText(text: string): string | undefined {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text.trim());
  if (!match) return undefined;
  const [, sign = '', whole = '', fraction = '', power = '0'] = match;
  const digits = whole + fraction;
  const point = whole.length + Number(power);
  let out: string;
  if (point <= 0) out = `0.${'0'.repeat(-point)}${digits}`;
  else if (point >= digits.length) out = `${digits}${'0'.repeat(point - digits.length)}`;
  else out = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return normalizeDecimal(`${sign}${out}`);
}

/**
 * The precision of amounts in get-transfer's lists (Transaction and Transfer party amounts: "8
 * fractional digits"). sendTransaction's `amount` is a JSON number, and a provider that serialises a
 * binary double may write 64.07900000000001 for the 64.07900000 its lists show: amounts are compared
 * at this precision (the exact text is still what is stored and published).
 */
export const LIST_AMOUNT_PLACES = 8;

/**
 * `text` rounded to `places` fractional digits, half away from zero, by digit arithmetic on the text
 * (never a float), in canonical form (normalizeDecimal). Half away from zero: the noise of a double's
 * 17-digit rendering is far from a tie, and a true tie (an exact ...5 in the ninth place) rounds the way
 * people round money on paper. Undefined when `text` is not a decimal.
 */
export function roundDecimal(text: string, places: number): string | undefined {
  const canonical = normalizeDecimal(text);
  if (canonical === undefined) return undefined;
  const negative = canonical.startsWith('-');
  const [whole = '0', fraction = ''] = (negative ? canonical.slice(1) : canonical).split('.');
  if (fraction.length <= places) return canonical;
  const kept = `${whole}${fraction.slice(0, places)}`;
  const roundUp = fraction.charCodeAt(places) >= 53; // '5'
  let digits = kept;
  if (roundUp) {
    // Add one unit in the last kept place, carrying through nines.
    const out = digits.split('');
    let i = out.length - 1;
    for (; i >= 0; i--) {
      if (out[i] === '9') out[i] = '0';
      else {
        out[i] = String(Number(out[i]) + 1);
        break;
      }
    }
    digits = (i < 0 ? '1' : '') + out.join('');
  }
  const point = digits.length - places;
  const body = places === 0 ? digits : `${digits.slice(0, point)}.${digits.slice(point)}`;
  return normalizeDecimal(`${negative ? '-' : ''}${body}`);
}

/** Whether two decimal texts are the same amount at `places` fractional digits (both rounded, see roundDecimal). */
export function decimalEqualsAtPlaces(a: string, b: string, places: number): boolean {
  const ra = roundDecimal(a, places);
  return ra !== undefined && ra === roundDecimal(b, places);
}
