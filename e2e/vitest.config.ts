import { defineConfig } from 'vitest/config';

// The e2e runner (`npm run e2e`): every e2e/**/*.e2e.ts against real components. One file at a
// time (each starts its own cluster in its own network namespaces; the machine has 2 cores).
export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    pool: 'forks',
    fileParallelism: false,
    reporters: ['verbose'],
  },
});
