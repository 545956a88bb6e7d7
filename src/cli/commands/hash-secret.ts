import type { Readable } from 'node:stream';
import type { ReadStream } from 'node:tty';
import { hashSecret } from '../../lib/secret-hash.ts';
import type { Command } from '../command.ts';
import { CliError, invalidInput } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';

/** Longer input is not a secret someone typed or pasted but a file piped by mistake. */
const MAX_SECRET_BYTES = 4_096;

export const hashSecretCommand: Command = {
  name: 'hash-secret',
  synopsis: 'hash-secret',
  summary: 'read a secret from stdin and print its scrypt hash, for CONSOLE_USERS',
  help: `Reads a secret (a console user's password) from stdin and prints its hash as the worker's
configuration takes it: scrypt$N$r$p$salt$hash (scrypt, a random 16-byte salt, base64url). The
secret itself is never printed or stored. At a terminal it asks twice without echoing what is typed;
from a pipe it reads everything up to the end, one final line break dropped.
Each run prints another hash of the same secret (the salt is new); every one of them verifies.

Needs no configuration.

Examples:
  custody-worker hash-secret                      (then type the secret twice)
  printf '%s' "$SECRET" | custody-worker hash-secret --json
  CONSOLE_USERS="alice:operator:$(custody-worker hash-secret)"`,
  options: {},
  positionals: { min: 0, max: 0, names: '' },
  async run({ out, stdin }) {
    const secret = isTerminal(stdin) ? await askTwice(stdin, (text) => out.notice(text)) : await readAll(stdin);
    if (secret === '') throw invalidInput('EMPTY_SECRET', 'the secret is empty: nothing to hash');
    const hash = await hashSecret(secret);
    out.result({ hash }, (value) => value.hash);
  },
};

function isTerminal(stream: Readable): stream is ReadStream {
  return (stream as Partial<ReadStream>).isTTY === true && typeof (stream as Partial<ReadStream>).setRawMode === 'function';
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += buffer.length;
    if (size > MAX_SECRET_BYTES) throw invalidInput('INPUT_TOO_LARGE', `a secret is at most ${MAX_SECRET_BYTES} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

async function askTwice(tty: ReadStream, prompt: (text: string) => void): Promise<string> {
  prompt('secret (not shown):');
  const first = await readHidden(tty);
  prompt('again:');
  const second = await readHidden(tty);
  if (first !== second) throw invalidInput('SECRETS_DIFFER', 'the two entries differ: nothing printed');
  return first;
}

/** One line from the terminal in raw mode, so that nothing typed is echoed. */
function readHidden(tty: ReadStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const finish = (settle: () => void) => {
      tty.off('data', onData);
      tty.setRawMode(false);
      tty.pause();
      settle();
    };
    const onData = (chunk: Buffer | string) => {
      for (const char of String(chunk)) {
        if (char === '\r' || char === '\n' || char === '\u0004') return finish(() => resolve(text));
        if (char === '\u0003') return finish(() => reject(new CliError('INTERRUPTED', 'interrupted: nothing printed', ExitCode.FAILURE)));
        text = char === '\u007f' || char === '\b' ? [...text].slice(0, -1).join('') : text + char;
      }
    };
    tty.setRawMode(true);
    tty.setEncoding('utf8');
    tty.on('data', onData);
    tty.resume();
  });
}
