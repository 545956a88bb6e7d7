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
  const text = String(value);
  const exp = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!exp) return text;
  const [, sign = '', lead = '', rest = '', power = '0'] = exp;
  const digits = lead + rest;
  const point = 1 + Number(power);
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${'0'.repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
