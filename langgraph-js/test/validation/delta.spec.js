// The validation package's getDeltaChannelHistory tests, which its
// validate() leaves out (they are exported beside it): on HxSaver too.
import { deltaChannelHistoryTests } from '@langchain/langgraph-checkpoint-validation';
import initializer from './initializer.js';

afterAll(() => initializer.afterAll());
deltaChannelHistoryTests(initializer);
