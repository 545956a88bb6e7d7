import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decimalEqualsAtPlaces, decimalFromNumberText, LIST_AMOUNT_PLACES, roundDecimal } from '../../src/lib/decimal.ts';

/** n units of 1e-8 as decimal text with 8 fractional digits, by string arithmetic. */
function eightPlaces(n: bigint): string {
  const digits = n.toString().padStart(9, '0');
  return `${digits.slice(0, -8)}.${digits.slice(-8)}`;
}

/** What a provider writes for that amount as a binary double: the shortest form, or 17 significant digits. */
function doubleTexts(amount: string): string[] {
  const double = Number(amount);
  return [String(double), double.toPrecision(17)].map((text) => decimalFromNumberText(text)!);
}

describe('amounts compared at the precision of the lists (8 fractional digits)', () => {
  it.each([
    ['64.07900000000001', '64.07900000'],
    ['2.2279999999999998', '2.22800000'],
    ['0.999999999', '1.00000000'],
    ['9.999999995', '10.00000000'],
    ['-0.000000015', '-0.00000002'],
    ['0.000000004', '0'],
    ['12345678901234.567891234', '12345678901234.56789123'],
  ])('%s equals %s at 8 places', (answer, list) => {
    expect(decimalEqualsAtPlaces(answer, list, LIST_AMOUNT_PLACES)).toBe(true);
  });

  it('a binary double of any amount up to 10,000,000 with 8 fractional digits equals the list text, in both renderings', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (n) => {
        const list = eightPlaces(n);
        for (const text of doubleTexts(list)) {
          if (!decimalEqualsAtPlaces(text, list, LIST_AMOUNT_PLACES)) throw new Error(`${text} vs ${list}`);
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('two different amounts of the list never compare equal, whatever renders them', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), fc.bigInt({ min: 1n, max: 10n ** 6n }), (n, delta) => {
        const a = eightPlaces(n);
        const b = eightPlaces(n + delta);
        expect(decimalEqualsAtPlaces(a, b, LIST_AMOUNT_PLACES)).toBe(false);
        for (const text of doubleTexts(b)) expect(decimalEqualsAtPlaces(text, a, LIST_AMOUNT_PLACES)).toBe(false);
      }),
      { numRuns: 3_000 },
    );
  });

  it('rounds by digits, never through a float: 30 significant digits stay exact', () => {
    expect(roundDecimal('123456789012345678901.123456785', 8)).toBe('123456789012345678901.12345679');
    expect(roundDecimal('999999999999999999999.999999995', 8)).toBe('1000000000000000000000');
    expect(roundDecimal('0.5', 0)).toBe('1');
    expect(roundDecimal('1.23', 8)).toBe('1.23');
    expect(roundDecimal('not a number', 8)).toBeUndefined();
  });

  it('agrees with exact rational rounding on generated decimal texts', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 25n }), fc.integer({ min: 0, max: 12 }), fc.boolean(), (units, scale, negative) => {
        const digits = units.toString().padStart(scale + 1, '0');
        const text = `${negative ? '-' : ''}${scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`}`;
        // Half away from zero on the integer of units: the reference, in bigint arithmetic.
        const shift = scale > 8 ? 10n ** BigInt(scale - 8) : 1n;
        const rounded = scale > 8 ? (units + shift / 2n) / shift : units * 10n ** BigInt(8 - scale);
        const expected = rounded === 0n ? '0' : `${negative ? '-' : ''}${eightPlaces(rounded)}`;
        expect(roundDecimal(text, 8)).toBe(roundDecimal(expected, 8));
      }),
      { numRuns: 3_000 },
    );
  });
});
