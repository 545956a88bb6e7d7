/**
 * A headless Chromium for browser tests with nothing installed on the machine: a system Chromium or
 * Chrome when there is one (CHROMIUM_PATH, then the usual paths), else the Chromium that ships inside
 * the npm package @sparticuz/chromium (linux-x64), unpacked to the temp dir on first use.
 * CHROMIUM_PATH=npm uses the packaged one even where a system browser exists.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

const SYSTEM_BROWSERS = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];

/** Flags for a closed network: without them Chromium keeps trying to reach Google's hosts. */
const QUIET_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchChromium(): Promise<{ browser: Browser; source: string }> {
  const wanted = process.env.CHROMIUM_PATH;
  const system =
    wanted === 'npm' ? undefined : [wanted, ...SYSTEM_BROWSERS].find((path): path is string => Boolean(path) && existsSync(path!));
  if (system) {
    return { browser: await chromium.launch({ executablePath: system, headless: true, args: QUIET_FLAGS }), source: system };
  }
  const { default: bundled } = await import('@sparticuz/chromium');
  const executablePath = await bundled.executablePath();
  // Its args are tuned for one page per Lambda call; --single-process ends the browser with the first
  // closed context, so it goes.
  const args = bundled.args.filter((arg) => arg !== '--single-process');
  const browser = await chromium.launch({ executablePath, headless: true, args: [...new Set([...args, ...QUIET_FLAGS])] });
  return { browser, source: `@sparticuz/chromium (${executablePath})` };
}
