/**
 * Replays a failure: fast-check prints `{ seed, path }` when a property fails; run the file again with
 * FUZZ_SEED=<seed> (and FUZZ_PATH=<path> to go straight to the shrunk case). Without them every run
 * draws new cases.
 */
import fc from 'fast-check';

if (process.env.FUZZ_SEED) {
  fc.configureGlobal({
    ...fc.readConfigureGlobal(),
    seed: Number(process.env.FUZZ_SEED),
    ...(process.env.FUZZ_PATH ? { path: process.env.FUZZ_PATH } : {}),
  });
}
