/**
 * `npm run simulator`: the custody simulator as a standalone server. Wires env → server → signals
 * and nothing else. Prints one JSON line with the URL (never the client secret nor the access token).
 * `--provider bitgo` (or SIMULATOR_PROVIDER=bitgo) plays BitGo (bitgo/server.ts) instead of the
 * wallet-service provider.
 */
import { readSimulatorEnv } from './env.ts';
import { startBitgoSimulator } from './bitgo/server.ts';
import { startSimulator } from './server.ts';

/** EX_CONFIG from sysexits.h, as the worker uses for bad configuration. */
const EXIT_CONFIG = 78;

const env = readSimulatorEnv(process.env, process.argv.slice(2));
if (!env.ok) {
  for (const problem of env.problems) process.stderr.write(`${problem}\n`);
  process.exit(EXIT_CONFIG);
}

try {
  let close: () => Promise<void>;
  if (env.provider === 'bitgo') {
    const simulator = await startBitgoSimulator(env.bitgo);
    close = simulator.close;
    // never the access token
    process.stdout.write(
      `${JSON.stringify({ msg: 'custody simulator listening', provider: 'bitgo', url: simulator.url, port: simulator.port, apiBase: simulator.apiBase })}\n`,
    );
  } else {
    const simulator = await startSimulator(env.options);
    close = simulator.close;
    process.stdout.write(
      `${JSON.stringify({
        msg: 'custody simulator listening',
        url: simulator.url,
        port: simulator.port,
        clientId: simulator.clientId,
        tokenUrl: `${simulator.url}/oauth/token`,
      })}\n`,
    );
  }
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (error) {
  const code = (error as NodeJS.ErrnoException).code;
  process.stderr.write(`${JSON.stringify({ msg: 'custody simulator failed to start', code, error: (error as Error).message })}\n`);
  process.exit(1);
}
