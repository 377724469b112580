// vitest's configuration for the Durable Streams conformance suite
// (@durable-streams/server-conformance-tests), as durable-conformance.test.js
// runs it: the suite's own runner file, which vitest's default excludes
// (it is under node_modules) would skip.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const dist = path.dirname(require.resolve('@durable-streams/server-conformance-tests/package.json'));

export default {
  test: {
    root: path.join(dist, 'dist'),
    include: ['test-runner.js'],
    exclude: [],
    testTimeout: 60000,
    hookTimeout: 60000,
  },
};
