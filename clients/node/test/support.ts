// SPDX-License-Identifier: Apache-2.0
// Test support: a real `kvq serve` on a free port with its own data directory (binary from
// $KVQ_BIN), unique names, and polling with a deadline.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The kvq binary under test: $KVQ_BIN (ctest passes this build's), else the tree's release build. */
export const KVQ_BIN = process.env.KVQ_BIN || join(__dirname, '../../../../build/release/src/cli/kvq');

let seq = 0;
/** A name unique in this test run, valid as a type, id or worker id. */
export function uniq(prefix = 't'): string {
  return `${prefix}-${process.pid}-${++seq}`;
}

/** Polls `f` until it returns a truthy value; fails after `ms`. */
export async function until<T>(f: () => T | Promise<T>, ms: number, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A free TCP port on 127.0.0.1 (free when asked). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A `kvq serve` child process. */
export class KvqServer {
  url = '';
  output = '';
  private constructor(
    readonly proc: ChildProcess,
    readonly dataDir: string,
    private readonly ownDir: boolean,
  ) {}

  /** Starts one (on `port`, else a free one) and waits for its URL. */
  static async start(options: { port?: number; dataDir?: string; args?: string[] } = {}): Promise<KvqServer> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'kvq-node-'));
    const args = ['serve', '--listen', `127.0.0.1:${options.port ?? 0}`, '--data', dataDir, '--durability', 'nosync', ...(options.args ?? [])];
    const env = { ...process.env };
    delete env.KVQ_TOKEN;
    const proc = spawn(KVQ_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    const server = new KvqServer(proc, dataDir, options.dataDir === undefined);
    server.url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`kvq serve did not report its URL:\n${server.output}`)), 20000);
      const onData = (chunk: Buffer) => {
        server.output += chunk.toString();
        const m = /listening on (https?:\/\/\S+)/.exec(server.output);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!.replace(/\/$/, ''));
        }
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      proc.once('error', (e) => {
        clearTimeout(timer);
        reject(new Error(`cannot start ${KVQ_BIN} (set KVQ_BIN): ${e.message}`));
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`kvq serve exited (${code}):\n${server.output}`));
      });
    });
    return server;
  }

  /** SIGTERM, then SIGKILL after 10 s; removes its data directory if it made it. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(t);
    }
    if (this.ownDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A logger that keeps the worker's lines (for assertions) instead of printing them. */
export function memoryLog(): { lines: string[]; log: (level: string, msg: string, err?: unknown) => void } {
  const lines: string[] = [];
  return {
    lines,
    log: (level, msg, err) => lines.push(`${level} ${msg}${err instanceof Error ? ': ' + err.message : ''}`),
  };
}
