/**
 * The documentation's tables that restate code are generated from it (tools/docs/generate.ts): each
 * page on disk must equal what the generator makes of it now, so adding a variable, a metric, an event
 * type or a failure code without running `npm run docs` fails here. Nothing is written.
 */
import { describe, expect, it } from 'vitest';
import { PAGES, fillRegions, generatePages, generateRegions, readPage } from '../../tools/docs/generate.ts';

describe('generated documentation', () => {
  const pages = generatePages();

  it.each(Object.keys(PAGES))('%s is what `npm run docs` generates', (page) => {
    expect(readPage(page), `${page} is stale: run npm run docs`).toBe(pages[page]);
  });

  it('every region is generated into exactly one page', () => {
    const placed = Object.values(PAGES).flat().sort();
    expect(placed).toEqual(Object.keys(generateRegions()).sort());
  });

  it('replaces only what is between the markers', () => {
    const regions = { ...generateRegions(), 'cli-usage': 'NEW' };
    const text = 'before\n<!-- generated: cli-usage -->\nold\nlines\n<!-- end generated: cli-usage -->\nafter\n';
    expect(fillRegions('docs/cli.md', text, regions)).toBe(
      'before\n<!-- generated: cli-usage -->\nNEW\n<!-- end generated: cli-usage -->\nafter\n',
    );
  });

  it('refuses a page without its region, or with a region nobody generates', () => {
    const regions = generateRegions();
    expect(() => fillRegions('docs/cli.md', '# CLI\n', regions)).toThrow(/needs exactly one region/);
    const extra = '<!-- generated: cli-usage -->\n<!-- end generated: cli-usage -->\n<!-- generated: metrics -->\n';
    expect(() => fillRegions('docs/cli.md', extra, regions)).toThrow(/nobody generates here: metrics/);
  });
});
