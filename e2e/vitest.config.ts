import { defineConfig } from 'vitest/config';

// `npm run e2e`: the scenarios against the real components, one file at a time (they share the
// machine's ports, network namespaces and the one control plane each file starts).
export default defineConfig({
  test: {
    include: ['e2e/scenarios/**/*.e2e.ts'],
    testTimeout: 10 * 60_000,
    hookTimeout: 30 * 60_000,
    pool: 'forks',
    fileParallelism: false,
    sequence: { concurrent: false },
  },
});
