/**
 * tools/child-process.ts, the one way tests, the demo test and the benchmark run the package's scripts,
 * on a small script of its own: what the child's environment holds, its output and stdin, waiting for a
 * line, stopping (SIGTERM, then SIGKILL) and the clean-up of survivors.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killAllChildren, liveChildren, spawnNodeScript } from '../../tools/child-process.ts';

/** `node fixture.mjs <mode> [n]`: what each test needs from a child, and nothing else. */
const FIXTURE = `
const [mode, n] = process.argv.slice(2);
const keepAlive = () => setInterval(() => {}, 1_000);
if (mode === 'env') {
  console.log(JSON.stringify({ redis: process.env.REDIS_URL ?? null, secret: process.env.CUSTODY_CLIENT_SECRET ?? null, mine: process.env.MINE ?? null, path: Boolean(process.env.PATH) }));
} else if (mode === 'stdin') {
  let text = '';
  process.stdin.setEncoding('utf8').on('data', (chunk) => (text += chunk)).on('end', () => {
    process.stdout.write(text.toUpperCase());
    process.stderr.write('read ' + text.length + '\\n');
  });
} else if (mode === 'later') {
  console.log('starting');
  setTimeout(() => console.log('{"msg":"worker started"}'), 200);
  keepAlive();
} else if (mode === 'graceful') {
  process.on('SIGTERM', () => { console.log('bye'); process.exit(0); });
  console.log('ready');
  keepAlive();
} else if (mode === 'stubborn') {
  process.on('SIGTERM', () => console.log('ignoring SIGTERM'));
  console.log('ready');
  keepAlive();
} else if (mode === 'chatty') {
  for (let i = 0; i < Number(n); i++) console.log(String(i).padStart(99, '.'));
  console.log('done');
} else if (mode === 'quit') {
  console.error('giving up');
  process.exit(3);
}
`;

let dir: string;
let script: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'child-process-test-'));
  script = join(dir, 'fixture.mjs');
  await writeFile(script, FIXTURE);
});
afterEach(async () => {
  await killAllChildren();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('spawnNodeScript', () => {
  it("passes the caller's settings and none of this process's: REDIS_*, CUSTODY_* and the like are stripped", async () => {
    process.env.CUSTODY_CLIENT_SECRET = 'from-the-test-process';
    try {
      expect(process.env.REDIS_URL).toBeTruthy(); // test/helpers/setup-env.ts
      const bare = await spawnNodeScript(script, { args: ['env'] }).exit();
      expect(JSON.parse(bare.stdout)).toEqual({ redis: null, secret: null, mine: null, path: true });
      const given = await spawnNodeScript(script, { args: ['env'], env: { REDIS_URL: 'redis://given', MINE: 'yes' } }).exit();
      expect(JSON.parse(given.stdout)).toEqual({ redis: 'redis://given', secret: null, mine: 'yes', path: true });
    } finally {
      delete process.env.CUSTODY_CLIENT_SECRET;
    }
  });

  it('writes `input` to stdin and gives stdout, stderr and the exit separately', async () => {
    const result = await spawnNodeScript(script, { args: ['stdin'], input: 'hello' }).exit();
    expect(result).toEqual({ code: 0, signal: null, stdout: 'HELLO', stderr: 'read 5\n' });
    const failed = await spawnNodeScript(script, { args: ['quit'] }).exit();
    expect(failed).toMatchObject({ code: 3, stderr: 'giving up\n' });
  });

  it('waits for a line printed later, and fails naming the child when it exits without printing it', async () => {
    const child = spawnNodeScript(script, { args: ['later'], name: 'fixture' });
    expect(await child.waitForLog('worker started')).toBe('{"msg":"worker started"}');
    expect(await child.waitForLog('starting')).toBe('starting'); // already printed
    const quitter = spawnNodeScript(script, { args: ['quit'], name: 'quitter' });
    await expect(quitter.waitForLog('worker started')).rejects.toThrow(
      /quitter \(pid \d+\) did not log "worker started": exited \(code 3[\s\S]*giving up/,
    );
    await expect(quitter.waitFor('a word', (stdout) => stdout.includes('never'))).rejects.toThrow(/quitter .*no a word: exited/);
  });

  it('stops with SIGTERM, and with SIGKILL when the child outlives the grace period', async () => {
    const graceful = spawnNodeScript(script, { args: ['graceful'] });
    await graceful.waitForLog('ready');
    expect(await graceful.stop(10_000)).toEqual({ code: 0, signal: null });
    expect(graceful.output()).toContain('bye');

    const stubborn = spawnNodeScript(script, { args: ['stubborn'] });
    await stubborn.waitForLog('ready');
    expect(await stubborn.stop(300)).toEqual({ code: null, signal: 'SIGKILL' });
    expect(stubborn.output()).toContain('ignoring SIGTERM');
    expect(stubborn.running).toBe(false);
  });

  it('keeps the newest output when it is longer than maxOutputChars', async () => {
    const child = spawnNodeScript(script, { args: ['chatty', '500'], maxOutputChars: 1_000 });
    expect(await child.exit()).toMatchObject({ code: 0 });
    expect(child.output().length).toBeLessThanOrEqual(1_000);
    expect(child.output().endsWith('.499\ndone\n')).toBe(true);
    expect(child.stdout()).toBe(child.output());
  });

  it('kills a child that does not exit in time, and every survivor on killAllChildren()', async () => {
    const hung = spawnNodeScript(script, { args: ['stubborn'], name: 'hung' });
    await expect(hung.exit(300)).rejects.toThrow(/hung \(pid \d+\) did not exit within 300 ms/);
    expect(await hung.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const survivors = [spawnNodeScript(script, { args: ['stubborn'] }), spawnNodeScript(script, { args: ['graceful'] })];
    await Promise.all(survivors.map((child) => child.waitForLog('ready')));
    expect(liveChildren()).toEqual(survivors);
    await killAllChildren();
    expect(liveChildren()).toEqual([]);
    for (const child of survivors) expect(await child.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });
});
