/** The BitGo simulator: a real HTTP server faithful to docs/bitgo-api.md. */
export { startBitgoSimulator } from './server.ts';
export type { BitgoSimulator } from './server.ts';
export { BITGO_ENDPOINTS, BITGO_FAULT_KINDS, DEFAULT_BITGO_ACCESS_TOKEN, defaultBitgoSettings } from './settings.ts';
export type { BitgoEndpoint, BitgoSettings, BitgoSimulatorOptions } from './settings.ts';
export { BITGO_TRANSFER_STATES } from './state.ts';
export type { BitgoSendCount, BitgoStats, BitgoTransferState, BitgoTransferView } from './state.ts';
