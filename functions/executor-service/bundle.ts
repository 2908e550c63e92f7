/**
 * Entry of the container's bundle (dist/main.cjs, see scripts/bundle.ts): exports main() without
 * running it, so that start.ts can evaluate the bundle once at image build time to produce its
 * V8 code cache, and call main() at run time.
 */
export { main } from './run.ts';
