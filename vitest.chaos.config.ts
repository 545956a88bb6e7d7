import { defineConfig } from 'vitest/config';
import base from './vitest.config.ts';

// `npm run test:chaos`: the chaos suite alone, one file at a time (it loads the whole machine).
// Not mergeConfig: it concatenates arrays, which would keep base's include (every test) and its
// exclude of test/chaos.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/chaos/**/*.test.ts'],
    exclude: ['node_modules/**'],
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
