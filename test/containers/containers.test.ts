/**
 * The container files checked against the code. No Docker engine runs here, so the Dockerfile and the
 * compose file are parsed and every value the code depends on (variables, commands, ports, the worker
 * configuration itself) is verified the way the processes inside the containers would read it.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config/config.ts';
import { parseDuration } from '../../src/config/duration.ts';
import { readSimulatorEnv } from '../../src/simulator/env.ts';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { contextSources, dockerIgnored, execForm, parseDockerfile, readDockerignore, stagesOf } from './dockerfile.ts';

// ---------------------------------------------------------------------------------------------------
// Compose: interpolation as `docker compose` does it, for the forms the file uses.

/**
 * `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`, `${VAR?message}` and `$$`.
 * Throws the message of a required variable that is unset, like compose refusing to start.
 */
function interpolate(text: string, env: Record<string, string | undefined>): string {
  return text.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, braced?: string, op?: string, word?: string, bare?: string) => {
      if (whole === '$$') return '$';
      const name = (braced ?? bare)!;
      const value = env[name];
      const missing = op?.startsWith(':') ? value === undefined || value === '' : value === undefined;
      if (op?.endsWith('-')) return missing ? (word ?? '') : value!;
      if (op?.endsWith('?')) {
        if (missing) throw new Error(`required variable ${name} is missing a value: ${word}`);
        return value!;
      }
      return value ?? '';
    },
  );
}

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: Array<string | { target: number; published?: string | number; host_ip?: string }>;
  depends_on?: string[] | Record<string, { condition?: string }>;
  stop_grace_period?: string;
  volumes?: string[];
  healthcheck?: { test: string | string[] };
}

interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** The environment block as text values (compose accepts a map or a list of NAME=value). */
function environmentOf(service: ComposeService): Record<string, string> {
  const block = service.environment ?? {};
  const entries: Array<[string, string]> = Array.isArray(block)
    ? block.map((line) => {
        const at = line.indexOf('=');
        return at === -1 ? [line, ''] : [line.slice(0, at), line.slice(at + 1)];
      })
    : Object.entries(block).map(([name, value]) => [name, value === null ? '' : String(value)]);
  return Object.fromEntries(entries);
}

function interpolatedEnvironment(service: ComposeService, hostEnv: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(environmentOf(service)).map(([name, value]) => [name, interpolate(value, hostEnv)]));
}

function commandOf(service: ComposeService, imageCmd: string[]): string[] {
  if (service.command === undefined) return imageCmd;
  return Array.isArray(service.command) ? service.command : service.command.split(/\s+/);
}

/** Container ports published by a service ("3000:3000", "127.0.0.1:6379:6379/tcp" or long form). */
function containerPorts(service: ComposeService): number[] {
  return (service.ports ?? []).map((port) => (typeof port === 'string' ? Number(port.split(':').at(-1)!.split('/')[0]) : port.target));
}

/** Go-style compose durations as used here (45s, 1m30s), in ms. */
/**
 * The host address each published port binds, after interpolation: short syntax `[ip:]published:target`
 * (no ip: every interface) or the long syntax's `host_ip`.
 */
function publishedAddresses(service: ComposeService, hostEnv: Record<string, string | undefined>): string[] {
  return (service.ports ?? []).map((port) => {
    if (typeof port !== 'string') return port.host_ip ?? '0.0.0.0';
    const text = interpolate(port, hostEnv);
    const match = /^(?:(.+):)?\d+(?:-\d+)?:\d+(?:-\d+)?(?:\/\w+)?$/.exec(text);
    if (!match) return '0.0.0.0'; // a bare container port: a random host port on every interface
    return match[1]?.replace(/^\[|\]$/g, '') ?? '0.0.0.0';
  });
}

function composeDurationMs(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`not a compose duration: ${text}`);
  return parts.reduce((sum, [, amount, unit]) => sum + parseDuration(`${amount}${unit}`)!, 0);
}

// ---------------------------------------------------------------------------------------------------

const read = (name: string) => readFileSync(join(PROJECT_ROOT, name), 'utf8');
const dockerfile = parseDockerfile(read('Dockerfile'));
const stages = stagesOf(dockerfile);
const finalStage = stages.at(-1)!;
const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as ComposeFile;
const dockerignore = readDockerignore(read('.dockerignore'));

const finalCmd = execForm(finalStage.instructions.findLast((i) => i.keyword === 'CMD')!.args);
const workdir = finalStage.instructions.findLast((i) => i.keyword === 'WORKDIR')?.args;

/** What an operator must export for `docker compose up` (the `${VAR:?…}` placeholders), sample values. */
const HOST_ENV = { DASHBOARD_USER: 'ops', DASHBOARD_PASSWORD: 'a-sample-dashboard-password' };

/**
 * Variables src/simulator/env.ts reads. env.ts exports no list, so this one is written from reading it;
 * the test below asserts every name really occurs there, so a rename in env.ts fails here.
 */
const SIMULATOR_VARIABLES = [
  'SIMULATOR_HOST',
  'SIMULATOR_PORT',
  'CUSTODY_CLIENT_ID',
  'CUSTODY_CLIENT_SECRET',
  'SIM_VISIBLE_AFTER',
  'SIM_TXID_AFTER',
  'SIM_TOKEN_LIFETIME',
  'SIM_NARROW_RESULTS',
  'SIM_MIXED_CASE',
  'SIM_TRAVEL_RULE_OUTGOING',
  'SIM_TRAVEL_RULE_MANDATORY',
];

describe('Dockerfile', () => {
  it('builds in at least two stages, each on a Node 24 base or an earlier stage', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const names = new Set<string>();
    for (const stage of stages) {
      if (!names.has(stage.base)) expect(stage.base).toMatch(/^node:24(\.\d+)*(-[a-z0-9.-]+)?(@sha256:[0-9a-f]{64})?$/);
      if (stage.name) names.add(stage.name);
    }
    expect(finalStage.base).toMatch(/^node:24/);
  });

  it('installs production dependencies only, with npm ci from the lockfile', () => {
    const installs = dockerfile.filter((i) => i.keyword === 'RUN' && /\bnpm\s+(ci|install|i)\b/.test(i.args));
    expect(installs.length).toBeGreaterThan(0);
    for (const install of installs) {
      expect(install.args).toMatch(/\bnpm\s+ci\b/);
      expect(install.args).toMatch(/--omit=dev\b/);
    }
    // The lockfile must be in the context before npm ci runs.
    const depsStage = stages.find((stage) => stage.instructions.some((i) => installs.includes(i)))!;
    const copied = depsStage.instructions.filter((i) => i.keyword === 'COPY').flatMap((i) => contextSources(i) ?? []);
    expect(copied).toEqual(expect.arrayContaining(['package.json', 'package-lock.json']));
  });

  it('gives the final stage the dependencies and the package files, in production mode', () => {
    const copies = finalStage.instructions.filter((i) => i.keyword === 'COPY');
    expect(copies.some((i) => /--from=\S+/.test(i.args) && /node_modules/.test(i.args))).toBe(true);
    const sources = copies.flatMap((i) => contextSources(i) ?? []);
    // package.json says "type": "module" for every .ts file; which modules are copied: image-content.test.ts.
    expect(sources).toEqual(expect.arrayContaining(['package.json']));
    const env = finalStage.instructions.filter((i) => i.keyword === 'ENV').map((i) => i.args);
    expect(env.some((args) => /(^|\s)NODE_ENV=production(\s|$)/.test(args))).toBe(true);
  });

  it('copies only paths that exist and that .dockerignore lets through', () => {
    const sources = dockerfile.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD').flatMap((i) => contextSources(i) ?? []);
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      expect(existsSync(join(PROJECT_ROOT, source)), `${source} exists`).toBe(true);
      expect(dockerIgnored(dockerignore, source), `${source} is not dockerignored`).toBe(false);
    }
    // and the heavy or private parts of the working tree stay out of the build context
    for (const excluded of ['node_modules', '.git', 'test-artifacts', 'test', 'tools', 'bench', '.env']) {
      expect(dockerIgnored(dockerignore, excluded), `${excluded} is dockerignored`).toBe(true);
    }
  });

  it('switches to a non-root user before CMD', () => {
    const userAt = finalStage.instructions.findLastIndex((i) => i.keyword === 'USER');
    const cmdAt = finalStage.instructions.findLastIndex((i) => i.keyword === 'CMD');
    expect(userAt).toBeGreaterThanOrEqual(0);
    expect(userAt).toBeLessThan(cmdAt);
    const user = finalStage.instructions[userAt]!.args.split(':')[0]!;
    expect(['root', '0']).not.toContain(user);
  });

  it('runs node on the worker entry, which exists', () => {
    expect(workdir).toBeDefined();
    expect(finalCmd[0]).toBe('node');
    expect(finalCmd[1]).toBe('src/worker.ts');
    expect(existsSync(join(PROJECT_ROOT, finalCmd[1]!))).toBe(true);
  });

  it('exposes the port the worker listens on by default and compose publishes', () => {
    const exposed = finalStage.instructions
      .filter((i) => i.keyword === 'EXPOSE')
      .flatMap((i) => i.args.split(/\s+/).map((p) => Number(p.split('/')[0])));
    const defaultPort = loadConfig({
      CUSTODY_SDK_URL: 'http://x',
      CUSTODY_BASE_URL: 'http://x',
      CUSTODY_CLIENT_ID: 'a',
      CUSTODY_CLIENT_SECRET: 'b',
      CUSTODY_ACCESS_TOKEN: 't',
    }).http.port;
    expect(exposed).toEqual([defaultPort]);
    expect(containerPorts(compose.services.worker!)).toEqual(exposed);
  });
});

describe('HEALTHCHECK probe', () => {
  let server: Server;
  let port: number;
  /** What the fake worker's /readyz answers; /healthz always answers 200, as a live process does. */
  let readyStatus = 200;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/healthz') res.writeHead(200).end('{"status":"ok"}');
      else if (req.url === '/readyz') res.writeHead(readyStatus).end();
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const healthcheck = () => {
    const instruction = finalStage.instructions.findLast((i) => i.keyword === 'HEALTHCHECK');
    expect(instruction, 'a HEALTHCHECK in the final stage').toBeDefined();
    const cmd = /\bCMD\s+(\[.*\])\s*$/.exec(instruction!.args);
    expect(cmd, 'HEALTHCHECK CMD in exec form').not.toBeNull();
    return execForm(cmd![1]!);
  };

  /** Runs the probe with this test's Node 24 (the image's node), HTTP_PORT pointing where we say. */
  const probe = (httpPort: number): Promise<number | null> => {
    const [node, ...args] = healthcheck();
    expect(node).toBe('node');
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? '', HTTP_PORT: String(httpPort) }, stdio: 'ignore' });
      child.once('error', reject);
      child.once('exit', (code) => resolve(code));
    });
  };

  it('probes readiness: exits 0 when /readyz answers 200, 1 when it answers 503 (alive but not ready) or nothing listens', async () => {
    readyStatus = 200;
    expect(await probe(port)).toBe(0);
    readyStatus = 503;
    expect(await probe(port)).toBe(1);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await probe(freePort)).toBe(1);
  });
});

describe('docker-compose.yml', () => {
  const services = compose.services;
  const worker = services.worker!;
  const simulator = services.simulator!;
  const redis = services.redis!;

  it('has redis, simulator and worker, the last two from this image', () => {
    expect(Object.keys(services).sort()).toEqual(['redis', 'simulator', 'worker']);
    expect(worker.build).toBeDefined();
    expect(simulator.image ?? simulator.build).toEqual(worker.image ?? worker.build);
    expect(simulator.build).toEqual(worker.build);
  });

  it('runs Redis 7 with every write fsynced and no eviction, on a named volume', () => {
    expect(redis.image).toMatch(/^redis:7(\b|$)/);
    const command = commandOf(redis, []).join(' ');
    expect(command).toMatch(/^redis-server\b/);
    expect(command).toMatch(/--appendonly yes\b/);
    expect(command).toMatch(/--appendfsync always\b/);
    expect(command).toMatch(/--maxmemory-policy noeviction\b/);
    const volume = redis.volumes?.find((v) => v.endsWith(':/data'));
    expect(volume, 'a volume on /data').toBeDefined();
    expect(compose.volumes).toHaveProperty(volume!.split(':')[0]!);
  });

  it('points each service command at a file that exists and that the image contains', () => {
    const copiedDirs = finalStage.instructions.filter((i) => i.keyword === 'COPY').flatMap((i) => contextSources(i) ?? []);
    for (const [name, service] of [
      ['worker', worker],
      ['simulator', simulator],
    ] as const) {
      const [program, file] = commandOf(service, finalCmd);
      expect(program, name).toBe('node');
      expect(existsSync(join(PROJECT_ROOT, file!)), `${name}: ${file} exists`).toBe(true);
      expect(
        copiedDirs.some((dir) => file === dir || file!.startsWith(`${dir}/`)),
        `${name}: ${file} is copied into the image`,
      ).toBe(true);
    }
    expect(commandOf(simulator, finalCmd)).toEqual(['node', 'src/simulator/main.ts']);
    expect(commandOf(worker, finalCmd)).toEqual(['node', 'src/worker.ts']);
  });

  it('sets only variables the worker reads', () => {
    const names = Object.keys(environmentOf(worker));
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !CONFIG_VARIABLES.includes(name))).toEqual([]);
  });

  it('sets only variables the simulator reads', () => {
    const source = readFileSync(join(PROJECT_ROOT, 'src/simulator/env.ts'), 'utf8');
    for (const name of SIMULATOR_VARIABLES) expect(source, `env.ts reads ${name}`).toMatch(new RegExp(`'${name}'|env\\.${name}\\b`));
    const names = Object.keys(environmentOf(simulator));
    expect(names).toContain('SIMULATOR_HOST');
    expect(names.filter((name) => !SIMULATOR_VARIABLES.includes(name))).toEqual([]);
  });

  it('refuses to start without dashboard credentials (required placeholders)', () => {
    const raw = environmentOf(worker);
    expect(raw.HTTP_HOST).toBe('0.0.0.0');
    for (const name of ['DASHBOARD_USER', 'DASHBOARD_PASSWORD']) {
      expect(raw[name]).toMatch(new RegExp(`^\\$\\{${name}:\\?[^}]+\\}$`));
      const without = { ...HOST_ENV, [name]: undefined };
      expect(() => interpolatedEnvironment(worker, without)).toThrow(name);
    }
  });

  it('gives the worker a valid configuration that reaches the compose services', () => {
    const env = interpolatedEnvironment(worker, HOST_ENV);
    const config = loadConfig(env);

    expect(config.http.host).toBe('0.0.0.0');
    expect(config.http.dashboardUser).toBe(HOST_ENV.DASHBOARD_USER);
    expect(config.http.dashboardPassword).toBe(HOST_ENV.DASHBOARD_PASSWORD);
    expect(containerPorts(worker)).toEqual([config.http.port]);

    const redisUrl = new URL(config.redis.url);
    expect(redisUrl.hostname).toBe('redis');
    expect(Number(redisUrl.port || 6379)).toBe(6379);

    const sim = readSimulatorEnv(interpolatedEnvironment(simulator, HOST_ENV));
    if (!sim.ok) throw new Error(`simulator environment: ${sim.problems.join('; ')}`);
    expect(sim.options.host).toBe('0.0.0.0');
    if (config.custody.provider !== 'wallet-service') throw new Error('the compose file configures the wallet-service provider');
    const custody = config.custody.settings;
    for (const url of [custody.sdkUrl, custody.baseUrl, custody.tokenUrl!]) {
      const parsed = new URL(url);
      expect(parsed.hostname).toBe('simulator');
      expect(Number(parsed.port)).toBe(sim.options.port);
    }
    expect(new URL(custody.tokenUrl!).pathname).toBe('/oauth/token');
    expect(custody.clientId).toBe(sim.options.clientId);
    expect(custody.clientSecret).toBe(sim.options.clientSecret);
  });

  it('starts the worker after healthy Redis and simulator', () => {
    expect(worker.depends_on).toBeDefined();
    const deps: Record<string, { condition?: string }> = Array.isArray(worker.depends_on)
      ? Object.fromEntries(worker.depends_on.map((d) => [d, {}]))
      : worker.depends_on!;
    expect(Object.keys(deps).sort()).toEqual(['redis', 'simulator']);
    for (const name of ['redis', 'simulator']) {
      expect(deps[name]!.condition).toBe('service_healthy');
      expect(services[name]!.healthcheck, `${name} has a healthcheck`).toBeDefined();
    }
  });

  it('publishes every port on 127.0.0.1 only, unless the operator sets WORKER_PUBLISH for the worker', () => {
    for (const [name, service] of Object.entries(services)) {
      const addresses = publishedAddresses(service, HOST_ENV);
      expect(addresses.length, `${name} publishes its port`).toBeGreaterThan(0);
      expect(addresses, name).toEqual(addresses.map(() => '127.0.0.1'));
    }
    expect(publishedAddresses(worker, { ...HOST_ENV, WORKER_PUBLISH: '0.0.0.0' })).toEqual(['0.0.0.0']);
  });

  it("checks the worker's readiness with the image's HEALTHCHECK (/readyz), not overridden", () => {
    expect(worker.healthcheck).toBeUndefined();
    const probe = finalStage.instructions.findLast((i) => i.keyword === 'HEALTHCHECK')!.args;
    expect(probe).toContain('/readyz');
    expect(probe).not.toContain('/healthz');
  });

  it('compiles the simulator healthcheck script and probes the simulator port', () => {
    const test = simulator.healthcheck!.test;
    expect(Array.isArray(test)).toBe(true);
    const [kind, node, flag, script] = test as string[];
    expect([kind, node, flag]).toEqual(['CMD', 'node', '-e']);
    expect(() => new Script(script!)).not.toThrow();
    const port = readSimulatorEnv(interpolatedEnvironment(simulator, HOST_ENV));
    expect(port.ok && script!.includes(`127.0.0.1:${port.options.port}/`)).toBe(true);
  });

  it('waits longer than SHUTDOWN_TIMEOUT before killing the worker', () => {
    const config = loadConfig(interpolatedEnvironment(worker, HOST_ENV));
    expect(worker.stop_grace_period).toBeDefined();
    expect(composeDurationMs(worker.stop_grace_period!)).toBeGreaterThan(config.shutdownTimeoutMs);
  });
});

describe('compose interpolation (test helper)', () => {
  it('substitutes defaults, required values and $$ like docker compose', () => {
    expect(interpolate('${A:-x}/${B-y}/$$/${C}', { A: '', B: '' })).toBe('x//$/');
    expect(interpolate('${A:?need A}', { A: 'v' })).toBe('v');
    expect(() => interpolate('${A:?need A}', { A: '' })).toThrow('need A');
    expect(interpolate('${A?need A}', { A: '' })).toBe('');
    expect(dockerIgnored(['node_modules', '*.log', '!keep.log'], 'node_modules/x/y.js')).toBe(true);
    expect(dockerIgnored(['node_modules', '*.log', '!keep.log'], 'keep.log')).toBe(false);
    expect(dockerIgnored(['test'], 'src/test.ts')).toBe(false);
    expect(
      publishedAddresses({ ports: ['3000:3000', '127.0.0.1:1:2', '[::1]:5:6/udp', '7', { target: 8, host_ip: '10.0.0.1' }] }, {}),
    ).toEqual(['0.0.0.0', '127.0.0.1', '::1', '0.0.0.0', '10.0.0.1']);
  });
});
