// LangGraph.js's checkpointer validation suite on HxSaver, in the
// suite's own runner (vitest): validation.test.js runs it.
import { validate } from '@langchain/langgraph-checkpoint-validation';
import initializer from './initializer.js';

validate(initializer);
