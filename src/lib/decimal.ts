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
 * Decimal text of a JSON number as upstream wrote it (spec 2.4 sends `amount` as a number).
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
