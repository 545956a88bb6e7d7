/**
 * Drops what describes a person before anything is printed: the `user` inside any `raw` (upstream API 2.4; the
 * client removes it from submitted records, but 2.3 and 2.5 declare `raw` as "null or any value", so a
 * provider could put one there too) and the travel-rule originator data `dataJson` (upstream API 2.6). A
 * `raw` given as JSON text is parsed, cleaned and written back as text. Returns a copy.
 */
export function withoutPersonalData(value: unknown): unknown {
  return clean(value, false);
}

function clean(value: unknown, insideRaw: boolean): unknown {
  if (Array.isArray(value)) return value.map((item) => clean(item, false));
  if (value === null || typeof value !== 'object') return insideRaw && typeof value === 'string' ? cleanRawText(value) : value;
  const copy: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === 'dataJson') continue;
    if (insideRaw && key === 'user') continue;
    // defineProperty: a `__proto__` key read from JSON stays a plain field instead of a prototype.
    Object.defineProperty(copy, key, { value: clean(inner, key === 'raw'), enumerable: true, writable: true, configurable: true });
  }
  return copy;
}

function cleanRawText(text: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return text;
  return 'user' in parsed ? JSON.stringify(clean(parsed, true)) : text;
}
