/**
 * Entry point of `npm run serve`, the tests and the bench (type stripping, or tsc's dist/). The
 * container starts the same main() through the bundle's loader (start.ts, scripts/bundle.ts).
 */
import { main } from './run.ts';

await main();
