/**
 * Child process used by global-setup.ts to try testcontainers `redis:7`.
 *
 * It runs in its own process because the Docker client can hang on a dead or
 * unreachable endpoint, keeping open sockets that would stop vitest from
 * exiting. The parent just drops this process after its time limit.
 *
 * IPC protocol:
 *   child → parent: { type: 'ready', url } | { type: 'error', message }
 *   parent → child: { type: 'stop' } (or IPC disconnect): stop the container and exit.
 */
import type { StartedTestContainer } from 'testcontainers';

process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';

let container: StartedTestContainer | undefined;
let stopping = false;

async function stopAndExit(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    // Hard cap: never linger, even if the runtime hangs.
    setTimeout(() => process.exit(code), 60_000).unref();
    if (container) await container.stop().catch(() => {});
  }
  process.exit(code);
}

function send(msg: { type: 'ready'; url: string } | { type: 'error'; message: string }): void {
  if (process.connected) process.send?.(msg);
}

process.on('message', (msg: { type?: string }) => {
  if (msg?.type === 'stop') void stopAndExit(0);
});
// Parent gone or gave up on us.
process.on('disconnect', () => {
  if (container) void stopAndExit(0);
  else setTimeout(() => process.exit(1), 60_000).unref();
});

try {
  const { GenericContainer, Wait } = await import('testcontainers');
  // The image's defaults are RDB saves without AOF, which the worker's start-up check refuses
  // (snapshot-only): AOF on, and the eviction policy it requires, as the private redis-server has.
  container = await new GenericContainer('redis:7.0')
    .withCommand(['redis-server', '--appendonly', 'yes', '--maxmemory-policy', 'noeviction'])
    .withExposedPorts(6379)
    .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
    .start();
  if (!process.connected) await stopAndExit(0);
  send({ type: 'ready', url: `redis://${container.getHost()}:${container.getMappedPort(6379)}` });
} catch (err) {
  send({ type: 'error', message: ((err as Error).message ?? String(err)).split('\n')[0] ?? 'unknown error' });
  process.exit(1);
}
