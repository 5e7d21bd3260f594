// SPDX-License-Identifier: Apache-2.0
// The package's ES module entry (`import { Client } from '@kvq/client'`): the same classes as
// the CommonJS build (dist/index.js), so a program that loads both gets one Client, not two.
export * from '../dist/index.js';
