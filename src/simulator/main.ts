/**
 * `npm run simulator`: the custody simulator as a standalone server. Wires env → server → signals
 * and nothing else. Prints one JSON line with the URL (never the client secret).
 */
import { readSimulatorEnv } from './env.ts';
import { startSimulator } from './server.ts';

/** EX_CONFIG from sysexits.h, as the worker uses for bad configuration. */
const EXIT_CONFIG = 78;

const env = readSimulatorEnv(process.env);
if (!env.ok) {
  for (const problem of env.problems) process.stderr.write(`${problem}\n`);
  process.exit(EXIT_CONFIG);
}

try {
  const simulator = await startSimulator(env.options);
  process.stdout.write(
    `${JSON.stringify({
      msg: 'custody simulator listening',
      url: simulator.url,
      port: simulator.port,
      clientId: simulator.clientId,
      tokenUrl: `${simulator.url}/oauth/token`,
    })}\n`,
  );
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void simulator.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (error) {
  const code = (error as NodeJS.ErrnoException).code;
  process.stderr.write(`${JSON.stringify({ msg: 'custody simulator failed to start', code, error: (error as Error).message })}\n`);
  process.exit(1);
}
