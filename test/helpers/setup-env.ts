/**
 * Per-worker setup file: point REDIS_URL at the test Redis chosen by global setup,
 * so code that reads process.env (src config, spawned child processes inheriting
 * env) can never fall back to the shared redis://127.0.0.1:6379 default.
 * Tests that need a different env should build one explicitly.
 */
import { inject } from 'vitest';
import './provided-context.ts';

process.env.REDIS_URL = inject('redisUrl');
