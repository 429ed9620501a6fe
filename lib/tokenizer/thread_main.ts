/**
 * A tokenizer thread's entry where the program's own (`main.ts`) is not the one running (tests,
 * benchmarks): `TokenizerPool` starts this module unless told the program's entry.
 */

import { tokenizerThread } from "./thread.ts";

tokenizerThread();
