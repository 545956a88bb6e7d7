/** The custody simulator: a real HTTP server faithful to docs/upstream-api.md (docs/contract.md section 6). */
export { startSimulator } from './server.ts';
export type { Simulator } from './server.ts';
export { workerBitgoEnv, workerCustodyEnv, type SimulatorAddress } from './worker-env.ts';
export {
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  FAULT_KINDS,
  SIM_ENDPOINTS,
  SIM_PROFILES,
  SettingsError,
  defaultSettings,
} from './settings.ts';
export type {
  DeepPartial,
  FaultKind,
  FaultPlan,
  SimEndpoint,
  SimProfile,
  SimulatorOptions,
  SimulatorSettings,
  TravelRuleSetting,
} from './settings.ts';
export type { SendCount, SimulatorStats, TransferView } from './state.ts';
export type { SubmitRecord, TransactionRecord, TransferParty, WalletRecord, WalletTransactionRecord } from './records.ts';
