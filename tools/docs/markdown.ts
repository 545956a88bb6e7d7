/** Markdown helpers of the documentation generator (tools/docs/generate.ts). */

/** A Markdown table in the repository's style (`|---|`), cells escaped. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map(cell).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

function cell(text: string): string {
  if (/[\r\n]/.test(text)) throw new Error(`a table cell cannot hold a line break: ${JSON.stringify(text)}`);
  return text.replace(/\|/g, '\\|');
}

export const code = (text: string) => `\`${text}\``;
