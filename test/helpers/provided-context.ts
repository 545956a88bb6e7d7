/** Values passed from test/helpers/global-setup.ts to tests via vitest's provide/inject. */
declare module 'vitest' {
  export interface ProvidedContext {
    /** Redis URL every test should use (never the shared 6379 unless REDIS_URL says so). */
    redisUrl: string;
    /** Where redisUrl came from. */
    redisSource: 'env' | 'testcontainers' | 'redis-server';
  }
}

export {};
