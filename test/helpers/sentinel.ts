/** One Sentinel (`redis-server --sentinel`) watching a primary on loopback, as `mymaster`; for tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { getFreePort, REDIS_SERVER_BIN } from '../../tools/redis/redis-server.ts';
import { until } from './wait.ts';

export async function startSentinel(primaryPort: number): Promise<{ port: number; stop(): Promise<void> }> {
  const port = await getFreePort();
  const dir = await mkdtemp(join(tmpdir(), 'sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  await writeFile(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${primaryPort} 1`,
      'sentinel down-after-milliseconds mymaster 1000',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(REDIS_SERVER_BIN, [conf, '--sentinel'], { stdio: 'ignore' });
  const probe = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  probe.on('error', () => undefined); // refused until the Sentinel listens
  await until(
    'the Sentinel knows the master',
    10_000,
    async () => {
      try {
        const master = (await probe.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')) as string[] | null;
        return master?.[1] === String(primaryPort) ? true : undefined;
      } catch {
        return undefined;
      }
    },
    100,
  );
  probe.disconnect();
  return {
    port,
    async stop() {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
