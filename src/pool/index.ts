/** The engine pool's public face: the engines episodes run on, placement, drains. */
export { type DrainedEngines, readDrained, setDrained } from "./drain.js";
export type { EngineView } from "./engine.js";
export {
  type EvaluationPlacement,
  engineLost,
  type Placement,
  singleEngine,
  unlessStuckAfterLoss,
} from "./episode-placement.js";
export type { PoolObserver, PoolOptions } from "./options.js";
export { type Candidate, pickEngine, probeDelayMs, totalSlots } from "./placement.js";
export { EnginePool } from "./pool.js";
