/** The engine pool's public face: the engines episodes run on, placement, drains. */
export { type DrainedEngines, readDrained, setDrained } from "./drain.js";
export { type Candidate, pickEngine, probeDelayMs, totalSlots } from "./placement.js";
export {
  EnginePool,
  type EvaluationPlacement,
  engineLost,
  type Placement,
  type PoolObserver,
  type PoolOptions,
  singleEngine,
} from "./pool.js";
