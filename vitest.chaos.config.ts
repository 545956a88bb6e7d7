import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.ts';

// `npm run test:chaos`: the chaos suite alone, one file at a time (it loads the whole machine).
export default mergeConfig(
  base,
  defineConfig({
    test: {
      include: ['test/chaos/**/*.test.ts'],
      exclude: ['node_modules/**'],
      fileParallelism: false,
      testTimeout: 600_000,
      hookTimeout: 120_000,
    },
  }),
);
