import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Integration tests spawn redis-server / worker child processes: keep files
// parallel, but only a few at a time.
const maxWorkers = Math.max(2, Math.min(4, availableParallelism() - 1));

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The chaos suite runs on its own (`npm run test:chaos`, vitest.chaos.config.ts).
    exclude: ['test/chaos/**', 'node_modules/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/setup-env.ts'],
    environment: 'node',
    pool: 'forks',
    fileParallelism: true,
    maxWorkers,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
  },
});
