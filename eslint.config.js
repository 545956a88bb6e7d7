// ESLint (flat config): typescript-eslint's recommended rules over the worker, the producer package,
// the tools, the benchmark and the tests, plus an import-cycle rule. `npm run lint`; CI runs it.
import js from '@eslint/js';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const ADAPTER_MESSAGE = 'domain code uses src/custody/port.ts (and errors.ts, deadline.ts, budget.ts), not a custody adapter';
const FACTORY_MESSAGE = 'a CustodyPort is built by src/custody/provider.ts, in src/app.ts and the CLI only; domain code is given one';

export default tseslint.config(
  { ignores: ['node_modules/**', 'packages/producer/dist/**', 'bench/results/**', '.tmp/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    languageOptions: { parserOptions: { ecmaVersion: 'latest', sourceType: 'module' } },
    // Imports name their `.ts` files (Node's type stripping): Node's own resolution finds them.
    settings: {
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json'] })],
      // no-cycle parses the modules an import reaches: TypeScript ones with typescript-eslint's parser.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
    },
    rules: {
      // A module that imports itself through others cannot be read, or loaded, in one order.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // `_name` marks a value destructured away on purpose (e.g. `raw` dropped from a record).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    // Domain code reaches a custody provider only through the files directly in src/custody/ (port.ts,
    // errors.ts, deadline.ts, budget.ts, decorators.ts). Every folder under src/custody/ is an adapter
    // (wallet-service/, the generic http/, any later provider's), built by src/custody/provider.ts, the
    // factory src/app.ts and the CLI use.
    files: ['src/jobs/**/*.ts', 'src/transfers/**/*.ts', 'src/ledger/**/*.ts', 'src/queues/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/custody/*/**'], message: ADAPTER_MESSAGE },
            { group: ['**/custody/provider.ts', '**/custody/providers.ts'], message: FACTORY_MESSAGE },
          ],
        },
      ],
    },
  },
  {
    // The CLI gets its CustodyPort from the factory, as the worker does: it names no adapter.
    files: ['src/cli/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['**/custody/*/**'], message: FACTORY_MESSAGE }] }] },
  },
  {
    // The port itself leans on no adapter either; the registry (providers.ts) is the one file that names
    // them, and the factory (provider.ts) builds from it.
    files: ['src/custody/*.ts'],
    ignores: ['src/custody/providers.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['./*/**'], message: ADAPTER_MESSAGE }] }] },
  },
  {
    files: ['**/*.js'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly' } },
  },
);
