// vitest's settings for the validation suite (validation.test.js runs it)
import { fileURLToPath } from 'node:url';

export default {
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['validate.spec.js', 'delta.spec.js'],
    globals: true,
    fileParallelism: false,
    testTimeout: 30000,
    hookTimeout: 30000,
  },
};
