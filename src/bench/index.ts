/** Where an evaluation's scenarios and images come from: the built-in suite built from this repository. */

export {
  type BenchBuildRequest,
  type BenchBuildResult,
  type BenchImage,
  type BenchTarget,
  benchRefs,
  OfflineBench,
  type OfflineBenchOptions,
  type PushAuth,
  parseBenchTag,
  parseBenchTarget,
  parsePushEvents,
  pushAuthFor,
  splitRef,
} from "./offline-bench.js";
export { ProjectImages, type ProjectImagesOptions } from "./project-images.js";
