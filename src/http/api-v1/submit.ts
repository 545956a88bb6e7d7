/**
 * `POST /api/v1/transfers` (docs/contract.md section 5): section 3's payload over HTTP, for services
 * that do not speak Redis, idempotent by sequenceId.
 *
 * Order, each refusal before anything is stored: the key (401, onRequest), the body's size (413, the
 * parser), the rate per key (429, preHandler), the payload with the producer package's own validation
 * (422), then the sequenceId: its record's payload hash, or before the worker wrote one, the hash this
 * route stored SET NX (200 the same payload, 409 another), then the producer package's own enqueue (202).
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { NotReplicatedError, ProducerUnavailableError } from '../../../packages/producer/src/errors.ts';
import { z } from 'zod';
import { parseEnqueuedPayload, submitPayloadSchema } from '../../../packages/producer/src/payload.ts';
import { TransferProducer } from '../../../packages/producer/src/producer.ts';
import type { App } from '../../app.ts';
import type { SubmitApiKey } from '../../config/console.ts';
import type { Keys } from '../../ledger/keys.ts';
import { parseSecretHash, VerifiedSecrets, verifySecret, type SecretHash } from '../../lib/secret-hash.ts';
import type { AuditReader } from '../../operations/audit.ts';
import { isHashOf, payloadHash } from '../../transfers/payload-hash.ts';
import { documentOnly } from '../openapi.ts';
import { documented, errorBody } from '../schemas.ts';
import { redisTimedOut } from '../transfers.ts';
import { TIMED_OUT } from '../within-budget.ts';
import { transferDetail } from './reads.ts';
import { resubmittedSchema, submittedSchema } from './responses.ts';

/** Requests per key and window (a producer's burst; each one costs at least one Redis round trip). */
export const SUBMIT_RATE_LIMIT = { max: 600, timeWindowMs: 60_000 } as const;

/**
 * The largest body: section 3's limits (two hex texts of 1 MiB, base64 of 1.4 MiB, metadata of 4 KiB, a
 * travel-rule reference of 256 characters) are 3.4 MiB; the rest is room for the keys, whitespace and
 * a few unknown fields. Neither hex nor base64 needs escaping in JSON, so a valid payload fits.
 */
export const SUBMIT_BODY_LIMIT = 4 * 1024 * 1024;

/** How long a verified key is taken again without scrypt (a producer submits in bursts). */
export const KEY_VERIFIED_TTL_MS = 60_000;
const KEY_CACHE_ENTRIES = 256;

export interface SubmitOptions {
  app: App;
  keys: Keys;
  audit: AuditReader;
  metadataKeys: readonly string[];
  apiKeys: readonly SubmitApiKey[];
  rateLimit: { max: number; timeWindowMs: number };
  /** How long the pre-record payload hash is kept: the longest a job may wait before its record (RETENTION). */
  hashTtlMs: number;
  producer: { prefix: string; eventsStream: string; minReplicas: number; replicaTimeoutMs: number };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The SUBMIT_API_KEYS name whose key the request carried (submit route only). */
    submitKey?: string;
  }
}

/**
 * Bearer keys against every SUBMIT_API_KEYS hash. A success is remembered KEY_VERIFIED_TTL_MS under an
 * HMAC of the key with a key of this process, never under the key itself; failures are not remembered.
 * One verification at a time (scrypt takes 32 MiB and a thread of libuv's pool): a burst of wrong keys
 * queues behind itself and leaves the pool to Redis's reconnects and file work.
 */
export class ApiKeyCheck {
  readonly #keys: ReadonlyArray<{ name: string; hash: SecretHash }>;
  readonly #verified = new VerifiedSecrets<string>({ maxEntries: KEY_CACHE_ENTRIES, ttlMs: KEY_VERIFIED_TTL_MS });
  #tail: Promise<unknown> = Promise.resolve();

  constructor(keys: readonly SubmitApiKey[]) {
    this.#keys = keys.map(({ name, hash }) => {
      const parsed = parseSecretHash(hash);
      // config.ts checked every hash at start-up.
      if (!parsed) throw new Error('a submit API key has a malformed hash');
      return { name, hash: parsed };
    });
  }

  /** The name of the key, or undefined. */
  async check(key: string): Promise<string | undefined> {
    return this.#verified.get([key], () => {
      const run = this.#tail.then(() => this.#find(key));
      this.#tail = run.catch(() => undefined);
      return run;
    });
  }

  /** Every hash is tried, so the time taken does not tell which entry a key is. */
  async #find(key: string): Promise<string | undefined> {
    let found: string | undefined;
    for (const { name, hash } of this.#keys) if ((await verifySecret(key, hash)) && found === undefined) found = name;
    return found;
  }
}

function bearer(request: FastifyRequest): string | undefined {
  const match = /^Bearer +([\x21-\x7e]{1,512}) *$/i.exec(request.headers.authorization ?? '');
  return match?.[1];
}

export const submitPlugin: FastifyPluginAsync<SubmitOptions> = async (server, options) => {
  const { app, keys, audit, metadataKeys } = options;
  const check = new ApiKeyCheck(options.apiKeys);
  const producer = new TransferProducer({ connection: app.redis, ...options.producer });
  server.addHook('onClose', () => producer.close());
  documentOnly(server);

  const conflict = (sequenceId: string) => ({
    error: 'SEQUENCE_ID_CONFLICT',
    code: 'SEQUENCE_ID_CONFLICT',
    message: `another payload holds sequenceId ${sequenceId}`,
  });

  /** What a repeat is answered: the transfer (200) when its record holds this hash, 409 another; undefined: no record. */
  async function answerFromRecord(sequenceId: string, hash: string) {
    const record = await app.ledger.get(sequenceId);
    if (!record) return undefined;
    // No hash: a record older than hashes, a rejected job's or a cancel's: nothing proves the payloads equal.
    if (record.payloadHash === undefined || !isHashOf(record.payloadHash, hash)) return { status: 409, body: conflict(sequenceId) };
    const detail = await transferDetail(app, audit, sequenceId, metadataKeys);
    if (detail === undefined || detail === TIMED_OUT) return detail && { status: 503, body: TIMED_OUT };
    // The job that created the record: the one the first submit answered with (its id is jobIdFor's).
    return { status: 200, body: { ...detail, jobId: record.jobId } };
  }

  const schema = documented('Submit a transfer (section 3), idempotent by sequenceId', {
    security: [{ submitKey: [] }],
    body: submitPayloadSchema,
    response: {
      202: submittedSchema,
      200: resubmittedSchema,
      409: errorBody.extend({ code: z.literal('SEQUENCE_ID_CONFLICT'), message: z.string() }),
    },
    refusals: [401, 413, 422, 429, 503],
  });
  server.post(
    '/api/v1/transfers',
    {
      schema,
      bodyLimit: SUBMIT_BODY_LIMIT,
      onRequest: async (request, reply) => {
        const key = bearer(request);
        const name = key === undefined ? undefined : await check.check(key);
        if (name === undefined) {
          return reply
            .code(401)
            .header('www-authenticate', 'Bearer')
            .send({ error: 'UNAUTHORIZED', message: 'a submit API key is required' });
        }
        request.submitKey = name;
      },
      config: {
        rateLimit: {
          max: options.rateLimit.max,
          timeWindow: options.rateLimit.timeWindowMs,
          // After the key is known (onRequest) and the body read: counted per key, not per address.
          hook: 'preHandler',
          keyGenerator: (request: FastifyRequest) => `submit:${request.submitKey ?? ''}`,
        },
      },
    },
    async (request, reply) => {
      const parsed = parseEnqueuedPayload(request.body);
      if (!parsed.ok) return reply.code(422).send({ error: 'INVALID_PAYLOAD', issues: parsed.issues });
      const payload = parsed.payload;
      const sequenceId = payload.halfSigned.sequenceId;
      const hash = payloadHash(payload);
      const log = request.log.child({ sequenceId, submitKey: request.submitKey });

      const existing = await answerFromRecord(sequenceId, hash);
      if (existing?.body === TIMED_OUT) return redisTimedOut(reply);
      if (existing) return reply.code(existing.status).send(existing.body);

      // Before the worker wrote the record: the first hash stored for the sequenceId is what it holds.
      const first = (await app.redis.set(keys.submittedPayloadHash(sequenceId), hash, 'PX', options.hashTtlMs, 'NX')) === 'OK';
      if (!first) {
        const held = await app.redis.get(keys.submittedPayloadHash(sequenceId));
        if (held !== null && !isHashOf(held, hash)) return reply.code(409).send(conflict(sequenceId));
      }
      // Again when a repeat: a first request whose add failed left the hash but no job; BullMQ makes a
      // second add of the job id a no-op otherwise.
      let receipt;
      try {
        receipt = await producer.trySubmit(payload);
      } catch (error) {
        // Not taken, or not yet on REDIS_MIN_REPLICAS replicas: the same request again is safe.
        if (error instanceof ProducerUnavailableError || error instanceof NotReplicatedError) {
          return reply.code(503).send({ error: error.code, message: 'Redis did not take the transfer; submit again' });
        }
        throw error;
      }
      if (receipt.outcome === 'ended') {
        // Its record is gone (RETENTION), its tombstone is not: the payload it had is no longer known.
        return reply.code(409).send({ ...conflict(sequenceId), message: `the transfer of sequenceId ${sequenceId} ended` });
      }
      // The worker may have written the record meanwhile, from another producer's job.
      const now = await answerFromRecord(sequenceId, hash);
      if (now?.body === TIMED_OUT) return redisTimedOut(reply);
      if (now?.status === 409) return reply.code(409).send(now.body);
      if (!first) return reply.code(200).send(now?.body ?? { sequenceId, jobId: receipt.jobId, state: 'queued' });
      log.info({ jobId: receipt.jobId }, 'transfer submitted over http');
      return reply.code(202).header('location', `/api/v1/transfers/${sequenceId}`).send({ sequenceId, jobId: receipt.jobId });
    },
  );
};
